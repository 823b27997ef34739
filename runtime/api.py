"""Thin DRF views of the runs: selector → serializer."""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, viewsets
from rest_framework.response import Response

from organization.caller import CallerMixin
from organization.schema import errors

from . import selectors
from .filters import RunFilter
from .models import Run
from .serializers import RunDetailSerializer, RunSerializer


class RunViewSet(CallerMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = RunSerializer
    filterset_class = RunFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Run.objects.none()
        return selectors.runs_of(caller=self.caller).order_by("-created_at", "-pk")

    @extend_schema(
        responses={200: RunSerializer(many=True), **errors(400, 401)},
        summary="Managed agents' runs, newest first (an agent: its own)",
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        responses={200: RunDetailSerializer, **errors(401, 404)},
        summary="A run: its triggers, every turn, tokens, outcome and what the model was given",
    )
    def retrieve(self, request, pk=None):
        run = selectors.run_for(caller=self.caller, run_id=pk)
        return Response(RunDetailSerializer(run).data)
