"""Approval policies and decisions: their inputs and their shape (docs/decisions.md)."""

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from infrastructure.errors import NotFound
from infrastructure.inputs import BIGINT_MAX
from organization import registry
from organization.models import Agent, Team
from organization.serializers import JSONObjectField

from ..decisions import decision_json
from ..models import (
    ANSWER_MAX_LENGTH,
    NOTE_MAX_LENGTH,
    OPTION_MAX_LENGTH,
    OPTIONS_MAX,
    POLICY_FIELDS,
    POLICY_LIST_MAX,
    QUESTION_MAX_LENGTH,
    ApprovalPolicy,
    DecisionKind,
    DecisionStatus,
    PolicyScope,
    PolicyTrigger,
    Urgency,
)

# --- policies -------------------------------------------------------------------------------


class ApprovalPolicySerializer(serializers.ModelSerializer):
    """A policy as the API shows it; written through the same fields (team by name, agent by id)."""

    team = serializers.CharField(
        required=False, allow_null=True, help_text="The team's name (scope team)."
    )
    agent = serializers.CharField(
        required=False, allow_null=True, help_text="The agent's id (scope agent)."
    )
    urgencies = serializers.ListField(
        child=serializers.ChoiceField(choices=Urgency.choices),
        required=False,
        max_length=len(Urgency.values),
    )
    tools = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=POLICY_LIST_MAX
    )
    deciders = serializers.ListField(
        child=serializers.CharField(max_length=150),
        required=False,
        max_length=POLICY_LIST_MAX,
        help_text="Usernames; empty: the organization's admins.",
    )
    cost_above_usd = serializers.DecimalField(
        max_digits=12, decimal_places=4, min_value=0, required=False, allow_null=True
    )
    expires_after_seconds = serializers.IntegerField(
        min_value=1, max_value=365 * 86_400, required=False
    )
    warn_before_seconds = serializers.IntegerField(
        min_value=0, max_value=365 * 86_400, required=False
    )
    decisions = serializers.SerializerMethodField()

    class Meta:
        model = ApprovalPolicy
        fields = [
            "id",
            *POLICY_FIELDS,
            "decisions",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "decisions", "created_at", "updated_at"]

    def to_representation(self, policy):
        data = super().to_representation(policy)
        data["team"] = policy.team.name if policy.team_id else None
        data["agent"] = policy.agent.handle if policy.agent_id else None
        return data

    @extend_schema_field(
        {
            "type": "object",
            "description": "How its decisions went: a count per status.",
            "additionalProperties": {"type": "integer"},
        }
    )
    def get_decisions(self, policy) -> dict:
        counts = self.context.get("counts", {}).get(policy.pk)
        return counts or {}

    def validate(self, data):
        """The whole policy as it will be (a PATCH merged with what is stored) must hold."""
        org = self.context["caller"].organization
        current = self.instance
        merged = {
            name: data.get(name, getattr(current, name, None) if current else None)
            for name in ("trigger", "scope", "urgencies", "tools", "cost_above_usd")
        }
        merged["scope"] = merged["scope"] or PolicyScope.ORGANIZATION
        trigger = merged["trigger"]
        if trigger == PolicyTrigger.URGENCY and not merged["urgencies"]:
            raise serializers.ValidationError({"urgencies": "An urgency policy names urgencies."})
        if trigger == PolicyTrigger.TOOL:
            if not merged["tools"]:
                raise serializers.ValidationError({"tools": "A tool policy names tools."})
            unknown = [t for t in merged["tools"] if t not in registry.REGISTRY]
            if unknown:
                raise serializers.ValidationError({"tools": f"Unknown tool: {unknown[0]}."})
        if trigger == PolicyTrigger.COLLABORATION_COST and merged["cost_above_usd"] is None:
            raise serializers.ValidationError(
                {"cost_above_usd": "A collaboration_cost policy sets cost_above_usd."}
            )
        scope = merged["scope"]
        if "team" in data or scope == PolicyScope.TEAM:
            name = (
                data.get("team")
                if "team" in data
                else (current.team.name if current and current.team_id else None)
            )
            data["team"] = None
            if scope == PolicyScope.TEAM:
                data["team"] = Team.objects.filter(organization=org, name=name or "").first()
                if data["team"] is None:
                    raise NotFound(f"Team not found: {name}", "team_not_found")
        if "agent" in data or scope == PolicyScope.AGENT:
            handle = (
                data.get("agent")
                if "agent" in data
                else (current.agent.handle if current and current.agent_id else None)
            )
            data["agent"] = None
            if scope == PolicyScope.AGENT:
                data["agent"] = Agent.objects.filter(organization=org, handle=handle or "").first()
                if data["agent"] is None:
                    raise NotFound(f"Agent not found: {handle}", "agent_not_found")
        if scope == PolicyScope.ORGANIZATION:
            data["team"], data["agent"] = None, None
        if data.get("deciders"):
            members = set(
                get_user_model()
                .objects.filter(memberships__organization=org, username__in=data["deciders"])
                .values_list("username", flat=True)
            )
            missing = [u for u in data["deciders"] if u not in members]
            if missing:
                raise serializers.ValidationError(
                    {"deciders": f"{missing[0]} is no member of the organization."}
                )
        expires = data.get("expires_after_seconds", getattr(current, "expires_after_seconds", None))
        warn = data.get("warn_before_seconds", getattr(current, "warn_before_seconds", 0))
        if expires is not None and warn and warn >= expires:
            raise serializers.ValidationError(
                {
                    "warn_before_seconds": "The warning comes before the expiry: less than expires_after_seconds."
                }
            )
        return data


# --- decisions ------------------------------------------------------------------------------

ACTION_SCHEMA = {
    "type": "object",
    "nullable": True,
    "description": "An approval's move: its tool's name and arguments, exactly as it would run.",
    "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
}
OUTCOME_SCHEMA = {
    "type": "object",
    "nullable": True,
    "properties": {
        "result": {"type": "string", "enum": ["executed", "skipped", "failed"]},
        "reason": {"type": "string"},
    },
}


class HumanDecisionSerializer(serializers.Serializer):
    """A decision, as `tasks.decisions.decision_json` shapes it at every door."""

    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=DecisionKind.choices)
    policy = serializers.IntegerField(allow_null=True)
    requested_by = serializers.CharField(
        allow_null=True, help_text="The agent's id; null: a human."
    )
    task = serializers.IntegerField(allow_null=True)
    action = serializers.SerializerMethodField()
    reason = serializers.CharField(help_text="Why the policy gates it.")
    question = serializers.CharField()
    options = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=DecisionStatus.choices)
    expires_at = serializers.DateTimeField(allow_null=True)
    decided_by = serializers.CharField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    comment = serializers.CharField()
    answer = serializers.CharField()
    outcome = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def to_representation(self, decision):
        return decision_json(decision)

    @extend_schema_field(ACTION_SCHEMA)
    def get_action(self, decision) -> dict | None:
        return decision.action

    @extend_schema_field(OUTCOME_SCHEMA)
    def get_outcome(self, decision) -> dict | None:
        return decision.outcome


class AwaitingApprovalSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["awaiting_approval"])
    decision = HumanDecisionSerializer()


class DecisionQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=DecisionStatus.choices, required=False)
    kind = serializers.ChoiceField(choices=DecisionKind.choices, required=False)
    task = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX, required=False)


class QuestionSerializer(serializers.Serializer):
    """`POST /api/decisions` (agent key) and the `ask_human` tool: a question about a task you hold."""

    kind = serializers.ChoiceField(choices=[DecisionKind.QUESTION], default=DecisionKind.QUESTION)
    task = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX, help_text="A task you hold.")
    question = serializers.CharField(
        max_length=QUESTION_MAX_LENGTH, help_text="The question, in a sentence or two."
    )
    options = serializers.ListField(
        child=serializers.CharField(max_length=OPTION_MAX_LENGTH),
        required=False,
        allow_null=True,
        max_length=OPTIONS_MAX,
        help_text=f"Up to {OPTIONS_MAX} answers to choose from (optional).",
    )


class AskHumanSerializer(QuestionSerializer):
    kind = None


class DecisionIdSerializer(serializers.Serializer):
    decision_id = serializers.IntegerField(
        min_value=1, max_value=BIGINT_MAX, help_text="The decision's id (from ask_human or a 202)."
    )


class ApproveSerializer(serializers.Serializer):
    arguments = JSONObjectField(
        required=False,
        allow_null=True,
        help_text="The move's arguments, edited (validated as the move's own input).",
    )
    comment = serializers.CharField(
        max_length=NOTE_MAX_LENGTH, required=False, allow_blank=True, default=""
    )


class CommentBodySerializer(serializers.Serializer):
    comment = serializers.CharField(
        max_length=NOTE_MAX_LENGTH, required=False, allow_blank=True, default=""
    )


class AnswerSerializer(serializers.Serializer):
    answer = serializers.CharField(max_length=ANSWER_MAX_LENGTH)
    comment = serializers.CharField(
        max_length=NOTE_MAX_LENGTH, required=False, allow_blank=True, default=""
    )


__all__ = [
    "AnswerSerializer",
    "ApprovalPolicySerializer",
    "ApproveSerializer",
    "AskHumanSerializer",
    "AwaitingApprovalSerializer",
    "CommentBodySerializer",
    "DecisionIdSerializer",
    "DecisionQuerySerializer",
    "HumanDecisionSerializer",
    "QuestionSerializer",
]
