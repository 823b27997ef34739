"""Thin DRF views of the organization app: validate → service/selector → JSON."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from . import registry
from .caller import resolve_caller
from .roster import get_roster
from .serializers import (
    CallToolSerializer,
    ErrorSerializer,
    RosterQuerySerializer,
    RosterSerializer,
    ToolSerializer,
)
from .tools import roster_subject

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Invalid input"),
    401: OpenApiResponse(ErrorSerializer, description="No or bad API key"),
    403: OpenApiResponse(ErrorSerializer, description="A rule forbids it"),
    404: OpenApiResponse(ErrorSerializer, description="Absent or another organization's"),
}


class RosterView(APIView):
    @extend_schema(
        parameters=[RosterQuerySerializer],
        responses={200: RosterSerializer, **ERRORS},
        summary="Seed 000's get_organization_roster",
    )
    def get(self, request):
        caller = resolve_caller(request)
        query = RosterQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        roster = get_roster(
            org=caller.organization,
            agent=roster_subject(caller, params.get("agent")),
            filter=params["filter"],
            expertise=params.get("expertise"),
            expertise_match=params["expertise_match"],
        )
        return Response(roster)


class CallToolView(APIView):
    @extend_schema(
        request=CallToolSerializer,
        responses={200: OpenApiResponse(description="The tool's result"), **ERRORS},
        summary="Run a tool of the registry as the key's agent",
    )
    def post(self, request):
        caller = resolve_caller(request)
        body = CallToolSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        registry.check_identity(caller, request.data if isinstance(request.data, dict) else {})
        result = registry.call_tool(
            caller, body.validated_data["toolName"], request.data.get("params")
        )
        return Response(result)


class ToolListView(APIView):
    @extend_schema(responses={200: ToolSerializer(many=True), 401: ERRORS[401]})
    def get(self, request):
        tools = registry.tools_for(resolve_caller(request))
        return Response([t.describe() for t in tools])
