"""Thin DRF views of the organization app: validate → service/selector → JSON."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from infrastructure.pagination import LimitOffsetPagination

from . import hierarchy as team
from . import registry, services
from .audit import audit_rows, describe
from .caller import CallerMixin
from .filters import AgentFilter
from .idempotency import IDEMPOTENCY_KEY, KEY_REUSED, idempotent
from .models import Agent, Team
from .prompt import system_prompt_for
from .roster import get_roster
from .schema import ERRORS, conflict, errors
from .selectors import agent_for_api, agents_for_api, teams_with_size
from .serializers import (
    AgentSerializer,
    AuditPageSerializer,
    AuditQuerySerializer,
    AvailabilityAnswerSerializer,
    AvailabilitySerializer,
    CallToolSerializer,
    RosterQuerySerializer,
    RosterSerializer,
    SuccessSerializer,
    SystemPromptSerializer,
    TeamRoleListSerializer,
    TeamRoleRequestSerializer,
    TeamRoleResponseSerializer,
    TeamRoleSerializer,
    TeamRulesRequestSerializer,
    TeamRulesResponseSerializer,
    TeamRulesSerializer,
    TeamSerializer,
    TeamSummarySerializer,
    ToolSerializer,
)
from .tools import roster_subject, visible_prompt_subject

AGENT_ID = OpenApiParameter(
    "agent_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="The agent's id (handle)."
)


class RosterView(CallerMixin, APIView):
    @extend_schema(
        parameters=[RosterQuerySerializer],
        responses={200: RosterSerializer, **ERRORS},
        summary="Seed 000's get_organization_roster",
    )
    def get(self, request):
        query = RosterQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        roster = get_roster(
            org=self.caller.organization,
            agent=roster_subject(self.caller, params.get("agent")),
            filter=params["filter"],
            expertise=params.get("expertise"),
            expertise_match=params["expertise_match"],
        )
        return Response(roster)


# A tool answers what its REST twin answers: its JSON object, or our error shape with the
# status its service raised (`GET /api/tools` describes each tool's params).
CALL_TOOL_RESPONSES = {
    200: OpenApiResponse(OpenApiTypes.OBJECT, description="The tool's result (a JSON object)"),
    **ERRORS,
    409: conflict(
        "The move conflicts with the organization's state: capacity_exceeded, agent_offline, "
        "delegation_loop, delegation_too_deep, self_delegation, "
        "already_assigned, already_queued, expert_available, invalid_transition, "
        "open_subtasks, parent_finished, session_finished, budget_exhausted, "
        "report_exceeds_budget"
    ),
}


class CallToolView(CallerMixin, APIView):
    @extend_schema(
        request=CallToolSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={**CALL_TOOL_RESPONSES, **KEY_REUSED},
        summary="Run a tool of the registry as the key's agent",
    )
    @idempotent
    def post(self, request):
        body = CallToolSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        registry.check_identity(self.caller, request.data if isinstance(request.data, dict) else {})
        result = registry.call_tool(
            self.caller, body.validated_data["toolName"], request.data.get("params")
        )
        return Response(result)


class ToolListView(CallerMixin, APIView):
    @extend_schema(responses={200: ToolSerializer(many=True), **errors(401)})
    def get(self, request):
        tools = registry.tools_for(self.caller)
        return Response([t.describe() for t in tools])


# --- read API: agents and teams ------------------------------------------------------


class AgentViewSet(CallerMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """The organization's agents with roster fields, team and hierarchy role; 2 queries a page."""

    serializer_class = AgentSerializer
    filterset_class = AgentFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Agent.objects.none()
        return agents_for_api(org=self.caller.organization).order_by("handle")

    @extend_schema(responses={200: AgentSerializer(many=True), **errors(400, 401)})
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(parameters=[AGENT_ID], responses={200: AgentSerializer, **errors(401, 404)})
    def retrieve(self, request, *args, **kwargs):
        # The hottest read of the API: one precompiled query, no serializer (the same fields,
        # tested against AgentSerializer's output).
        org = self.caller.organization
        return Response(agent_for_api(org=org, handle=self.kwargs["agent_id"]))


class AvailabilityView(CallerMixin, APIView):
    @extend_schema(
        request=AvailabilitySerializer,
        responses={200: AvailabilityAnswerSerializer, **ERRORS},
        summary="Set when you expect to be free (seed 001's availability_until; null clears)",
        operation_id="agents_me_availability",
    )
    def post(self, request):
        agent = self.caller.require_agent()
        registry.check_identity(self.caller, request.data)
        body = AvailabilitySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        agent = services.agent_set_availability(
            agent=agent, until=body.validated_data["availability_until"]
        )
        answer = {"id": agent.handle, "availability_until": agent.availability_until}
        return Response(AvailabilityAnswerSerializer(answer).data)


class TeamViewSet(CallerMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = TeamSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Team.objects.none()
        return teams_with_size(org=self.caller.organization)

    @extend_schema(responses={200: TeamSerializer(many=True), **errors(400, 401)})
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


class SystemPromptView(CallerMixin, APIView):
    @extend_schema(
        parameters=[AGENT_ID],
        responses={200: SystemPromptSerializer, **errors(401, 404)},
        summary="The agent's system prompt (custom prompt + organizational context), fresh",
        description="An agent key reads its own only (another agent's answers 404); "
        "organization keys and admin members read any agent's of their organization.",
    )
    def get(self, request, agent_id: str):
        agent = visible_prompt_subject(self.caller, agent_id)
        return Response({"system_prompt": system_prompt_for(agent)})


# --- seed 003: team hierarchy ---------------------------------------------------------


class TeamRolesView(CallerMixin, APIView):
    @extend_schema(
        responses={200: TeamRoleListSerializer, **errors(401, 403)},
        summary="List the roles of the organization's agents (organization key or admin)",
        operation_id="team_roles_list",
    )
    def get(self, request):
        roles = TeamRoleSerializer(team.roles_list(caller=self.caller), many=True).data
        return Response({"success": True, "roles": roles, "count": len(roles)})

    @extend_schema(
        request=TeamRoleRequestSerializer,
        responses={201: TeamRoleResponseSerializer, **ERRORS},
        summary="Assign or update an agent's role (upsert; organization key or admin)",
        operation_id="team_roles_set",
    )
    def post(self, request):
        data = TeamRoleRequestSerializer.validated(request.data)
        role = TeamRoleSerializer(team.role_set(caller=self.caller, data=data)).data
        return Response({"success": True, "role": role}, status=status.HTTP_201_CREATED)


class TeamRoleDetailView(CallerMixin, APIView):
    @extend_schema(
        parameters=[AGENT_ID],
        responses={200: TeamRoleResponseSerializer, **errors(401, 403, 404)},
        summary="The role of one agent (404 if none; organization key or admin)",
        operation_id="team_role_get",
    )
    def get(self, request, agent_id: str):
        role = TeamRoleSerializer(team.role_get(caller=self.caller, agent_id=agent_id)).data
        return Response({"success": True, "role": role})


class TeamRoleDeleteView(CallerMixin, APIView):
    @extend_schema(
        parameters=[AGENT_ID],
        request=None,
        responses={200: SuccessSerializer, **ERRORS},
        summary="Remove an agent's role (404 if none; organization key or admin)",
        operation_id="team_role_delete",
    )
    def post(self, request, agent_id: str):
        team.role_delete(caller=self.caller, agent_id=agent_id)
        return Response({"success": True, "message": f"Role removed from {agent_id}"})


class TeamRulesView(CallerMixin, APIView):
    @extend_schema(
        responses={200: TeamRulesResponseSerializer, **errors(401, 403)},
        summary="The organization's team rules (defaults if never set; organization key or admin)",
        operation_id="team_rules_get",
    )
    def get(self, request):
        rules = TeamRulesSerializer(team.rules_get(caller=self.caller)).data
        return Response({"success": True, "rules": rules})

    @extend_schema(
        request=TeamRulesRequestSerializer,
        responses={201: TeamRulesResponseSerializer, **ERRORS},
        summary="Update the team rules (organization key or admin)",
        operation_id="team_rules_set",
    )
    def post(self, request):
        data = TeamRulesRequestSerializer.validated(request.data)
        rules = TeamRulesSerializer(team.rules_set(caller=self.caller, data=data)).data
        # 201 as seed 003's reference implementation answers (its own tests assert it).
        return Response({"success": True, "rules": rules}, status=status.HTTP_201_CREATED)


class TeamSummaryView(CallerMixin, APIView):
    @extend_schema(
        responses={200: TeamSummarySerializer, **errors(401, 403)},
        summary="Supervisors, workers, specialists, unassigned agents, the rules (org key or admin)",
        operation_id="team_summary",
    )
    def get(self, request):
        summary = team.team_summary(caller=self.caller)
        return Response(TeamSummarySerializer({"success": True, **summary._asdict()}).data)


# --- issue 13 §3: who changed what ----------------------------------------------------


class AuditView(CallerMixin, APIView):
    @extend_schema(
        parameters=[AuditQuerySerializer],
        responses={200: AuditPageSerializer, **errors(400, 401, 403)},
        summary="Who changed what: the organization's agents, roles, rules, expertise groups "
        "and API keys, oldest first (organization key or admin)",
        description="Each change with when, the object, the action (created, changed, deleted; "
        "an API key's revocation is `revoked`), who made it (a user, an agent key or an "
        "organization key) and each field's value before and after. Paginated with "
        "`limit`/`offset`; an agent key answers 403.",
        operation_id="audit_list",
    )
    def get(self, request):
        self.caller.require_human()
        query = AuditQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = audit_rows(org=self.caller.organization, since=query.validated_data.get("since"))
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(describe(page))
