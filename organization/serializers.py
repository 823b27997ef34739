import json

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from infrastructure.errors import Invalid
from infrastructure.inputs import value_problem

from .history import ActorKind
from .models import AgentRole, AgentRuntime, AgentStatus, HierarchyRole
from .roster import EXACT, EXPERTISE_MATCHES, ROSTER_FILTERS
from .workload import status_for


# `x-json-text`: a tool's schema offers it as JSON text alone (organization/schema.py).
@extend_schema_field(
    {
        "anyOf": [{"type": "object", "additionalProperties": {}}, {"type": "string"}],
        "x-json-text": True,
    }
)
class JSONObjectField(serializers.DictField):
    """A free-form JSON object, or the same object as JSON text.

    OpenAI's strict mode cannot express a free-form object, so a tool offers it as JSON text.
    """

    def to_internal_value(self, data):
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except (ValueError, RecursionError):
                self.fail("not_a_dict", input_type="text that is not JSON")
            if not isinstance(data, dict):
                self.fail("not_a_dict", input_type=f"JSON text of a {type(data).__name__}")
            # Parsed here, past the body's guard: the same check (NaN, NUL, depth…).
            problem = value_problem(data, self.field_name)
            if problem:
                raise serializers.ValidationError(problem)
        return super().to_internal_value(data)


def blank_is_unset(help_text: str) -> serializers.CharField:
    """An optional text param; blank is "not given", as an empty `?agent=` in a query string."""
    return serializers.CharField(required=False, allow_blank=True, help_text=help_text)


class ErrorSerializer(serializers.Serializer):
    success = serializers.BooleanField(default=False)
    error = serializers.CharField()
    code = serializers.CharField()


class RosterQuerySerializer(serializers.Serializer):
    """Seed 000's roster params: `GET /api/roster` and the `get_organization_roster` tool."""

    filter = serializers.ChoiceField(
        choices=ROSTER_FILTERS,
        required=False,
        default=ROSTER_FILTERS[0],
        help_text="Filter roster results",
    )
    # Blank is "not given", as a query string's `?expertise=` is: both doors answer alike.
    expertise = blank_is_unset("Filter by specific expertise (if filter=by_expertise)")
    expertise_match = serializers.ChoiceField(
        choices=EXPERTISE_MATCHES,
        required=False,
        default=EXACT,
        help_text="exact (default, case-sensitive as seed 000) or ignore_case",
    )
    agent = blank_is_unset("Organization keys and admins: whose roster (agent id).")


class AgentParamSerializer(serializers.Serializer):
    """The `get_my_context` tool: whose context (an agent reads its own)."""

    agent = blank_is_unset("Organization keys only: whose context (an agent id).")


class DiscoverQuerySerializer(serializers.Serializer):
    """Seed 002's discovery params: `GET /api/experts` and the `discover_experts` tool."""

    agent = blank_is_unset("Organization keys only: whose worktree to look from (an agent id).")


class ColleagueSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    role = serializers.CharField()
    team = serializers.CharField(allow_null=True)
    seniorId = serializers.CharField(allow_null=True)
    expertise = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=AgentStatus.values)
    current_workload = serializers.IntegerField()
    workload_capacity = serializers.IntegerField()
    availability_until = serializers.DateTimeField(allow_null=True)


class RosterSerializer(serializers.Serializer):
    agent_context = ColleagueSerializer(allow_null=True)
    colleagues = ColleagueSerializer(many=True)


class CallToolSerializer(serializers.Serializer):
    toolName = serializers.CharField()
    # null is "not given", as in params (strict-mode clients send null for what they omit).
    params = serializers.DictField(required=False, default=dict, allow_null=True)
    agentId = serializers.CharField(
        required=False, allow_null=True, help_text="Ignored unless it differs: 403."
    )
    organizationId = serializers.CharField(
        required=False, allow_null=True, help_text="Ignored unless it differs: 403."
    )


class ToolAnnotationsSerializer(serializers.Serializer):
    """MCP's tool annotations; destructiveHint and idempotentHint are given for writing tools."""

    title = serializers.CharField()
    readOnlyHint = serializers.BooleanField()
    openWorldHint = serializers.BooleanField()
    destructiveHint = serializers.BooleanField(required=False)
    idempotentHint = serializers.BooleanField(required=False)


class ToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField()
    inputSchema = serializers.DictField()
    readOnly = serializers.BooleanField()
    annotations = ToolAnnotationsSerializer()


class HierarchyRoleSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=HierarchyRole.values)
    can_assign_to_peers = serializers.BooleanField()
    can_escalate_to_supervisor = serializers.BooleanField()


class AgentSerializer(serializers.Serializer):
    """The roster fields of seed 000, plus the team id and the seed-003 hierarchy role."""

    id = serializers.CharField(source="handle")
    name = serializers.CharField()
    role = serializers.CharField(help_text="Job title.")
    team = serializers.SerializerMethodField()
    team_id = serializers.IntegerField(allow_null=True)
    seniorId = serializers.SerializerMethodField()
    expertise = serializers.ListField(child=serializers.CharField())
    status = serializers.SerializerMethodField()
    current_workload = serializers.IntegerField()
    workload_capacity = serializers.IntegerField()
    availability_until = serializers.DateTimeField(allow_null=True)
    paused = serializers.BooleanField(source="is_paused")
    hierarchy_role = serializers.SerializerMethodField()
    runtime = serializers.ChoiceField(
        choices=AgentRuntime.values,
        help_text="external: the agent calls us; managed: the service runs it; "
        "a2a: a remote A2A agent its tasks are sent to.",
    )

    def get_team(self, agent) -> str | None:
        return agent.team.name if agent.team_id else None

    def get_seniorId(self, agent) -> str | None:
        return agent.senior.handle if agent.senior_id else None

    @extend_schema_field(serializers.ChoiceField(choices=AgentStatus.values))
    def get_status(self, agent) -> str:
        return status_for(
            is_paused=agent.is_paused,
            workload=agent.current_workload,
            capacity=agent.workload_capacity,
        )

    @extend_schema_field(HierarchyRoleSerializer(allow_null=True))
    def get_hierarchy_role(self, agent) -> dict | None:
        try:
            role = agent.hierarchy_role
        except AgentRole.DoesNotExist:
            return None
        return {
            "role": role.role,
            "can_assign_to_peers": role.can_assign_to_peers,
            "can_escalate_to_supervisor": role.can_escalate_to_supervisor,
        }


class AvailabilitySerializer(serializers.Serializer):
    availability_until = serializers.DateTimeField(
        allow_null=True,
        help_text="When you expect to be free (ISO 8601); null: available indefinitely.",
    )


class AvailabilityAnswerSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="Your agent id.")
    availability_until = serializers.DateTimeField(allow_null=True)


class TeamSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    agent_count = serializers.IntegerField()


class SystemPromptSerializer(serializers.Serializer):
    system_prompt = serializers.CharField()


# --- seed 003: team hierarchy ------------------------------------------------------------


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only: seed 003 refuses "yes" and 1, which DRF's BooleanField takes."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            raise serializers.ValidationError(f"{self.field_name} must be a boolean")
        return data


class SeedBodySerializer(serializers.Serializer):
    """A seed-003 body: refused with the seed's own sentences (`error_codes` by field), null
    taken as "not given" except where a field allows it (a null that clears)."""

    error_codes: dict[str, str] = {}

    @classmethod
    def validated(cls, data) -> dict:
        if not isinstance(data, dict):
            raise Invalid("The request body must be a JSON object", "invalid")
        fields = cls().fields
        given = {
            k: v for k, v in data.items() if v is not None or k in fields and fields[k].allow_null
        }
        body = cls(data=given)
        if not body.is_valid():
            field, errors = next(iter(body.errors.items()))
            raise Invalid(str(errors[0]), cls.error_codes.get(field, "invalid"))
        return dict(body.validated_data)


ROLE_REFUSED = f"Invalid role. Must be one of: {', '.join(sorted(HierarchyRole.values))}"


class TeamRoleRequestSerializer(SeedBodySerializer):
    error_codes = {"role": "invalid_role"}

    agent_id = serializers.CharField(
        help_text="The agent's id (handle).",
        trim_whitespace=False,
        error_messages={"required": "agent_id is required", "blank": "agent_id is required"},
    )
    role = serializers.ChoiceField(
        choices=HierarchyRole.values,
        error_messages={"required": ROLE_REFUSED, "invalid_choice": ROLE_REFUSED},
    )
    can_assign_to_peers = StrictBooleanField(required=False)
    can_escalate_to_supervisor = StrictBooleanField(required=False)


# Seed 003's role object of an AgentRole: `workspace_id` is the organization, `agent_id` the handle.
class TeamRoleSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    workspace_id = serializers.IntegerField(
        source="agent.organization_id", help_text="The organization's id."
    )
    agent_id = serializers.CharField(source="agent.handle")
    agent_name = serializers.CharField(source="agent.name")
    role = serializers.ChoiceField(choices=HierarchyRole.values)
    can_assign_to_peers = serializers.BooleanField()
    can_escalate_to_supervisor = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class TeamRoleResponseSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    role = TeamRoleSerializer()


class TeamRoleListSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    roles = TeamRoleSerializer(many=True)
    count = serializers.IntegerField()


class SuccessSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    message = serializers.CharField()


class TeamRulesRequestSerializer(SeedBodySerializer):
    allow_peer_assignment = StrictBooleanField(required=False)
    require_supervisor_for_tasks = StrictBooleanField(required=False)
    default_supervisor_agent_id = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        trim_whitespace=False,
        help_text="An agent holding the supervisor role; null clears.",
    )


class SecondsField(serializers.IntegerField):
    """A duration as whole seconds."""

    def to_representation(self, value) -> int:
        return int(value.total_seconds())


# A TeamRule's stale-queue thresholds by urgency (comments, not docstrings: those would enter
# the OpenAPI schema).
class StaleAfterSerializer(serializers.Serializer):
    critical = SecondsField(source="stale_after_critical")
    high = SecondsField(source="stale_after_high")
    normal = SecondsField(source="stale_after_normal")
    low = SecondsField(source="stale_after_low")


# Seed 003's rules object of a TeamRule (saved, or the unsaved defaults).
class TeamRulesSerializer(serializers.Serializer):
    workspace_id = serializers.IntegerField(source="organization_id")
    allow_peer_assignment = serializers.BooleanField()
    require_supervisor_for_tasks = serializers.BooleanField()
    default_supervisor_agent_id = serializers.CharField(
        source="default_supervisor.handle", allow_null=True
    )
    max_delegation_depth = serializers.IntegerField()
    stale_after_seconds = StaleAfterSerializer(source="*")
    created_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)


class TeamRulesResponseSerializer(serializers.Serializer):
    success = serializers.BooleanField()
    rules = TeamRulesSerializer()


class UnassignedAgentSerializer(serializers.Serializer):
    id = serializers.CharField(source="handle")
    name = serializers.CharField()


class TeamSummarySerializer(serializers.Serializer):
    success = serializers.BooleanField()
    supervisors = TeamRoleSerializer(many=True)
    workers = TeamRoleSerializer(many=True)
    specialists = TeamRoleSerializer(many=True)
    unassigned_agents = UnassignedAgentSerializer(many=True)
    rules = TeamRulesSerializer()


# --- the audit feed (issue 13 §3) ----------------------------------------------------


class AuditQuerySerializer(serializers.Serializer):
    since = serializers.DateTimeField(
        required=False,
        help_text="ISO 8601 date and time: changes at or after it (all when omitted).",
    )


class AuditWhoSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=ActorKind.choices)
    label = serializers.CharField(
        help_text="The user's name, the agent's id, the organization key's name (or prefix)."
    )
    key_prefix = serializers.CharField(
        allow_null=True, help_text="The prefix of the API key used, if one was."
    )


class AuditChangeSerializer(serializers.Serializer):
    field = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


class AuditEntrySerializer(serializers.Serializer):
    id = serializers.CharField()
    when = serializers.DateTimeField()
    model = serializers.CharField(help_text="agent, agent_role, team_rule, expertise_group, …")
    object_id = serializers.CharField()
    object_label = serializers.CharField()
    action = serializers.ChoiceField(choices=["created", "changed", "deleted", "revoked"])
    who = AuditWhoSerializer()
    changes = AuditChangeSerializer(many=True)


class AuditPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = AuditEntrySerializer(many=True)
