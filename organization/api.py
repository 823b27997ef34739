"""Thin DRF views of the organization app: validate → service/selector → JSON."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from . import registry, services, team
from .caller import resolve_caller
from .filters import AgentFilter
from .models import Agent, Team
from .prompt import system_prompt_for
from .roster import get_roster
from .selectors import agent_by_handle, agents_with_workload, teams_with_size
from .serializers import (
    AgentSerializer,
    AvailabilityAnswerSerializer,
    AvailabilitySerializer,
    CallToolSerializer,
    ErrorSerializer,
    RosterQuerySerializer,
    RosterSerializer,
    SuccessSerializer,
    SystemPromptSerializer,
    TeamRoleListSerializer,
    TeamRoleRequestSerializer,
    TeamRoleResponseSerializer,
    TeamRulesRequestSerializer,
    TeamRulesResponseSerializer,
    TeamSerializer,
    TeamSummarySerializer,
    ToolSerializer,
)
from .tools import roster_subject, visible_prompt_subject

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Invalid input"),
    401: OpenApiResponse(ErrorSerializer, description="No or bad API key"),
    403: OpenApiResponse(ErrorSerializer, description="A rule forbids it"),
    404: OpenApiResponse(ErrorSerializer, description="Absent or another organization's"),
}

AGENT_ID = OpenApiParameter(
    "agent_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="The agent's id (handle)."
)


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


# --- read API: agents and teams ------------------------------------------------------


class AgentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The organization's agents with roster fields, team and hierarchy role; 2 queries a page."""

    serializer_class = AgentSerializer
    filterset_class = AgentFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Agent.objects.none()
        return agents_with_workload(org=resolve_caller(self.request).organization).order_by(
            "handle"
        )

    def get_object(self):
        return agent_by_handle(
            org=resolve_caller(self.request).organization,
            handle=self.kwargs["agent_id"],
            with_workload=True,
        )

    @extend_schema(responses={200: AgentSerializer(many=True), 400: ERRORS[400], 401: ERRORS[401]})
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        parameters=[AGENT_ID], responses={200: AgentSerializer, 401: ERRORS[401], 404: ERRORS[404]}
    )
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)


class AvailabilityView(APIView):
    @extend_schema(
        request=AvailabilitySerializer,
        responses={200: AvailabilityAnswerSerializer, **ERRORS},
        summary="Set when you expect to be free (seed 001's availability_until; null clears)",
        operation_id="agents_me_availability",
    )
    def post(self, request):
        agent = resolve_caller(request).require_agent()
        body = AvailabilitySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        agent = services.agent_set_availability(
            agent=agent, until=body.validated_data["availability_until"]
        )
        answer = {"id": agent.handle, "availability_until": agent.availability_until}
        return Response(AvailabilityAnswerSerializer(answer).data)


class TeamViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = TeamSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Team.objects.none()
        return teams_with_size(org=resolve_caller(self.request).organization)

    @extend_schema(responses={200: TeamSerializer(many=True), 400: ERRORS[400], 401: ERRORS[401]})
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


class SystemPromptView(APIView):
    @extend_schema(
        parameters=[AGENT_ID],
        responses={200: SystemPromptSerializer, 401: ERRORS[401], 404: ERRORS[404]},
        summary="The agent's system prompt (custom prompt + organizational context), fresh",
        description="An agent key reads its own only (another agent's answers 404); "
        "organization keys and admin members read any agent's of their organization.",
    )
    def get(self, request, agent_id: str):
        agent = visible_prompt_subject(resolve_caller(request), agent_id)
        return Response({"system_prompt": system_prompt_for(agent)})


# --- seed 003: team hierarchy ---------------------------------------------------------

WRITE_ERRORS = {400: ERRORS[400], 401: ERRORS[401], 403: ERRORS[403], 404: ERRORS[404]}


class TeamRolesView(APIView):
    @extend_schema(
        responses={200: TeamRoleListSerializer, 401: ERRORS[401]},
        summary="List the roles of the organization's agents",
        operation_id="team_roles_list",
    )
    def get(self, request):
        roles = team.roles_list(org=resolve_caller(request).organization)
        return Response({"success": True, "roles": roles, "count": len(roles)})

    @extend_schema(
        request=TeamRoleRequestSerializer,
        responses={201: TeamRoleResponseSerializer, **WRITE_ERRORS},
        summary="Assign or update an agent's role (upsert; organization key or admin)",
        operation_id="team_roles_set",
    )
    def post(self, request):
        role = team.role_set(caller=resolve_caller(request), data=request.data)
        return Response({"success": True, "role": role}, status=status.HTTP_201_CREATED)


class TeamRoleDetailView(APIView):
    @extend_schema(
        parameters=[AGENT_ID],
        responses={200: TeamRoleResponseSerializer, 401: ERRORS[401], 404: ERRORS[404]},
        summary="The role of one agent (404 if none)",
        operation_id="team_role_get",
    )
    def get(self, request, agent_id: str):
        role = team.role_get(org=resolve_caller(request).organization, agent_id=agent_id)
        return Response({"success": True, "role": role})


class TeamRoleDeleteView(APIView):
    @extend_schema(
        parameters=[AGENT_ID],
        request=None,
        responses={200: SuccessSerializer, **WRITE_ERRORS},
        summary="Remove an agent's role (404 if none; organization key or admin)",
        operation_id="team_role_delete",
    )
    def post(self, request, agent_id: str):
        team.role_delete(caller=resolve_caller(request), agent_id=agent_id)
        return Response({"success": True, "message": f"Role removed from {agent_id}"})


class TeamRulesView(APIView):
    @extend_schema(
        responses={200: TeamRulesResponseSerializer, 401: ERRORS[401]},
        summary="The organization's team rules (defaults if never set)",
        operation_id="team_rules_get",
    )
    def get(self, request):
        rules = team.rules_get(org=resolve_caller(request).organization)
        return Response({"success": True, "rules": rules})

    @extend_schema(
        request=TeamRulesRequestSerializer,
        responses={201: TeamRulesResponseSerializer, **WRITE_ERRORS},
        summary="Update the team rules (organization key or admin)",
        operation_id="team_rules_set",
    )
    def post(self, request):
        rules = team.rules_set(caller=resolve_caller(request), data=request.data)
        # 201 as seed 003's reference implementation answers (its own tests assert it).
        return Response({"success": True, "rules": rules}, status=status.HTTP_201_CREATED)


class TeamSummaryView(APIView):
    @extend_schema(
        responses={200: TeamSummarySerializer, 401: ERRORS[401]},
        summary="Supervisors, workers, specialists, unassigned agents and the rules",
        operation_id="team_summary",
    )
    def get(self, request):
        return Response(team.team_summary(org=resolve_caller(request).organization))
