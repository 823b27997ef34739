"""Thin views of routines: validate → service/selector → serialize."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status as http
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from infrastructure.throttling import ApiKeyRateThrottle
from organization.caller import CallerMixin
from organization.schema import ERRORS, conflict, errors

from . import services
from .models import Outcome, Routine, Source
from .selectors import (
    last_occurrences,
    occurrences_of,
    routine_for,
    routines_visible_to,
)
from .serializers import (
    FiredSerializer,
    OccurrenceSerializer,
    RoutineCreatedSerializer,
    RoutineInputSerializer,
    RoutineSerializer,
)

FIRE_ERRORS = {
    **ERRORS,
    409: conflict(
        "routine_busy: a skip routine's last occurrence is open; routine_disabled: a disabled "
        "routine's trigger"
    ),
}


def shaped(routines: list[Routine]) -> list[dict]:
    context = {"last": last_occurrences(routines)}
    return RoutineSerializer(routines, many=True, context=context).data


def fired(occurrence) -> Response:
    data = {
        "at": occurrence.at,
        "outcome": occurrence.outcome,
        "task": occurrence.task_id,
        "reason": occurrence.reason,
    }
    code = http.HTTP_202_ACCEPTED if occurrence.outcome == Outcome.HELD else http.HTTP_201_CREATED
    return Response(FiredSerializer(data).data, status=code)


class RoutineViewSet(CallerMixin, GenericViewSet):
    serializer_class = RoutineSerializer
    queryset = Routine.objects.none()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Routine.objects.none()
        return routines_visible_to(self.caller)

    def routine(self) -> Routine:
        return routine_for(self.caller, self.kwargs["pk"])

    def body(self, partial: bool = False) -> dict:
        serializer = RoutineInputSerializer(data=self.request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    @extend_schema(
        responses={200: RoutineSerializer(many=True), **errors(400, 401)},
        summary="Routines (an agent: those its team or itself owns), with next run and last "
        "occurrence",
    )
    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(shaped(page))

    @extend_schema(
        request=RoutineInputSerializer,
        responses={201: RoutineCreatedSerializer, **ERRORS},
        summary="Create a routine (organization key); its webhook_secret is shown only here",
    )
    def create(self, request):
        self.caller.require_human()
        data = self.body()
        routine, secret = services.routine_create(organization=self.caller.organization, **data)
        data = {**shaped([routine])[0], "webhook_secret": secret}
        return Response(data, status=http.HTTP_201_CREATED)

    @extend_schema(responses={200: RoutineSerializer, **ERRORS})
    def retrieve(self, request, pk=None):
        return Response(shaped([self.routine()])[0])

    @extend_schema(request=RoutineInputSerializer, responses={200: RoutineSerializer, **ERRORS})
    def partial_update(self, request, pk=None):
        routine = self.routine()
        self.caller.require_human()
        routine = services.routine_update(routine=routine, **self.body(partial=True))
        return Response(shaped([routine])[0])

    @extend_schema(request=None, responses={204: None, **ERRORS})
    def destroy(self, request, pk=None):
        routine = self.routine()
        self.caller.require_human()
        services.routine_delete(routine=routine)
        return Response(status=http.HTTP_204_NO_CONTENT)

    @extend_schema(
        responses={200: OccurrenceSerializer(many=True), **ERRORS},
        summary="The routine's occurrences, newest first",
    )
    def occurrences(self, request, pk=None):
        page = self.paginate_queryset(occurrences_of(self.routine()))
        return self.get_paginated_response(OccurrenceSerializer(page, many=True).data)

    @extend_schema(
        request=None,
        responses={201: FiredSerializer, 202: FiredSerializer, **FIRE_ERRORS},
        summary="Fire the routine now (organization key); its concurrency applies",
    )
    def run(self, request, pk=None):
        routine = self.routine()
        self.caller.require_human()
        return fired(services.routine_run(routine=routine, source=Source.RUN))


class TriggerThrottle(ApiKeyRateThrottle):
    """API_THROTTLE_RATE per routine for its signed calls: a sender holding the secret cannot
    create work without bound (bad signatures are bounded by address, as failed keys are)."""

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": "routine-trigger", "ident": view.routine_id}


class RoutineTriggerView(APIView):
    """The signed inbound webhook: no key, the routine's secret signs "<timestamp>.<body>"."""

    authentication_classes = []
    permission_classes = []
    # Counted once the signature holds (below): unsigned calls must not use up a sender's rate.
    throttle_classes = []

    @extend_schema(
        request=None,
        parameters=[
            OpenApiParameter(
                "X-Agent-Org-Timestamp",
                str,
                OpenApiParameter.HEADER,
                required=True,
                description="Unix seconds; refused when more than 300 s away from now",
            ),
            OpenApiParameter(
                "X-Agent-Org-Signature",
                str,
                OpenApiParameter.HEADER,
                required=True,
                description='sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" with the '
                "routine's webhook secret>",
            ),
        ],
        responses={
            201: FiredSerializer,
            202: FiredSerializer,
            **FIRE_ERRORS,
        },
        auth=[],
        summary="Fire the routine from a signed webhook (no key)",
    )
    def post(self, request, pk=None):
        routine = services.routine_signed(
            pk,
            timestamp=request.headers.get("X-Agent-Org-Timestamp"),
            sent=request.headers.get("X-Agent-Org-Signature"),
            body=request.body,
        )
        self.routine_id = routine.pk
        throttle = TriggerThrottle()
        if not throttle.allow_request(request, self):
            self.throttled(request, throttle.wait())
        return fired(services.routine_run(routine=routine, source=Source.TRIGGER))
