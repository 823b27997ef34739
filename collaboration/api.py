"""Thin DRF views: validate → service/selector → serialize."""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from organization import registry
from organization.caller import CallerMixin
from organization.idempotency import IDEMPOTENCY_KEY, KEY_REUSED, idempotent
from organization.schema import ERRORS as BASE_ERRORS
from organization.schema import conflict, errors

from . import gate, selectors, services
from .filters import SessionFilter
from .models import CollaborationSession
from .serializers import (
    EstimateSerializer,
    SessionListSerializer,
    SessionSerializer,
    StartCollaborationSerializer,
    validated_start,
)

ERRORS = {
    **BASE_ERRORS,
    409: conflict("Agent offline / session finished / budget_exhausted: its estimate does not fit"),
}


class CollaborationViewSet(CallerMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = SessionSerializer
    filterset_class = SessionFilter
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return CollaborationSession.objects.none()
        if self.action == "list":
            return (
                selectors.sessions_of(caller=self.caller)
                .prefetch_related("contributions")
                .order_by("-created_at")
            )
        return selectors.session_detail_queryset(caller=self.caller)

    def get_serializer_class(self):
        return SessionListSerializer if self.action == "list" else SessionSerializer

    def _session(self, pk) -> CollaborationSession:
        return selectors.session_for(caller=self.caller, session_id=pk)

    @extend_schema(
        responses={200: SessionListSerializer(many=True), **errors(400, 401)},
        summary="The organization's sessions (an agent: those it started or is in)",
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=StartCollaborationSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={202: SessionSerializer, **ERRORS, **KEY_REUSED},
        summary="Start a collaborative session (seed 004); it runs on a worker",
    )
    @idempotent
    def create(self, request):
        caller = self.caller
        payload = request.data
        if isinstance(payload, dict):
            registry.check_identity(caller, payload)
            payload = {k: v for k, v in payload.items() if k not in registry.IDENTITY_FIELDS}
        spec = validated_start(payload, caller=caller)
        gate.check_start_cost(caller, payload, spec)
        session = selectors.with_details(services.session_start(caller=caller, spec=spec))
        body = SessionSerializer(session, context={"request": request}).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})

    @extend_schema(
        request=StartCollaborationSerializer,
        responses={200: EstimateSerializer, **ERRORS},
        summary="What a collaboration could cost, against each budget; nothing starts",
    )
    def estimate(self, request):
        payload = request.data
        if isinstance(payload, dict):
            registry.check_identity(self.caller, payload)
            payload = {k: v for k, v in payload.items() if k not in registry.IDENTITY_FIELDS}
        spec = validated_start(payload, caller=self.caller)
        answer = services.session_estimate(caller=self.caller, spec=spec)
        return Response(EstimateSerializer(answer).data)

    @extend_schema(responses={200: SessionSerializer, **ERRORS}, summary="A session and its result")
    def retrieve(self, request, pk=None):
        session = self._session(pk)
        return Response(SessionSerializer(session, context={"request": request}).data)

    @extend_schema(
        request=None,
        responses={200: SessionSerializer, **ERRORS},
        summary="Stop a session's pending work",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        caller = self.caller
        session = services.session_cancel(caller=caller, session=self._session(pk))
        session = selectors.session_for(caller=caller, session_id=session.pk)
        return Response(SessionSerializer(session, context={"request": request}).data)
