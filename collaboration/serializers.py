"""Shapes of the collaboration API and its tools' params."""

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from costs.selectors import cost_of_session
from costs.serializers import UsdField
from infrastructure.links import absolute_url
from organization.caller import resolve_caller
from organization.serializers import JSONObjectField

from .models import CollaborationSession, Contribution, Mode, SessionEvent, Synthesis
from .providers import PROVIDERS
from .selectors import may_read_tool_results, session_total_tokens


class SeedProviderSettingsSerializer(serializers.Serializer):
    """A seed-style provider's `config`: the settings taken from it."""

    model = serializers.CharField(required=False, help_text="The provider's model name.")
    temperature = serializers.FloatField(
        required=False, min_value=0, max_value=2, help_text="Sampling temperature, 0 to 2."
    )
    max_tokens = serializers.IntegerField(
        required=False, min_value=1, help_text="Most tokens per answer."
    )


class SeedProviderSerializer(serializers.Serializer):
    """Seed 004's `providers: [{"module": "provider-anthropic", "config": {...}}]`."""

    module = serializers.CharField(
        help_text="The provider's module, e.g. provider-anthropic or provider-openai."
    )
    config = SeedProviderSettingsSerializer(required=False, help_text="Its model settings.")


class LLMConfigSerializer(serializers.Serializer):
    """LLM settings (each optional): provider, model, temperature, max_tokens (or seed 004's
    `providers`)."""

    provider = serializers.ChoiceField(
        choices=PROVIDERS, required=False, help_text="Which LLM provider."
    )
    model = serializers.CharField(required=False, help_text="The provider's model name.")
    temperature = serializers.FloatField(
        required=False, min_value=0, max_value=2, help_text="Sampling temperature, 0 to 2."
    )
    max_tokens = serializers.IntegerField(
        required=False, min_value=1, help_text="Most tokens per answer."
    )
    system_prompt = serializers.CharField(
        required=False, allow_blank=True, help_text="Ad-hoc specialists only."
    )
    providers = SeedProviderSerializer(
        many=True, required=False,
        help_text="Seed 004's form of the settings: the first provider's module and config are "
        "read (provider, model, temperature, max_tokens given beside it win).",
    )  # fmt: skip


class AgentConfigSerializer(LLMConfigSerializer):
    """An agent's LLM settings, and the read-only registry tools it may call."""

    tools = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Read-only registry tools (names, as in GET /api/tools) the agent may call while "
        "it works: as itself for an organization agent, as the session's starter for an ad-hoc "
        "one. A tool that writes answers 400 tool_not_read_only, an unknown one 400 unknown_tool.",
    )


class AgentItemSerializer(serializers.Serializer):
    agent_id = serializers.CharField(
        required=False, help_text="An agent of the organization (its handle), or give `name`."
    )
    name = serializers.CharField(required=False, help_text="An ad-hoc specialist's name.")
    role = serializers.CharField(
        required=False, allow_blank=True, help_text="An ad-hoc specialist's role."
    )
    focus = serializers.CharField(
        required=False, allow_blank=True, help_text="What this agent focuses on."
    )
    config = AgentConfigSerializer(required=False, help_text="The agent's LLM settings and tools.")


class StartCollaborationSerializer(serializers.Serializer):
    """Seed 004's contract plus optional per-session limits (only lower than the server's).

    The `start_collaboration` tool's params and the REST body's schema; `services.session_create`
    checks what needs the organization and the server's limits (and the admin's door)."""

    task = serializers.CharField(help_text="The task for agents to collaborate on")
    agents = AgentItemSerializer(
        many=True,
        help_text="Agents to involve: {agent_id, focus} for an organization agent, or an ad-hoc "
        "specialist {name, role, focus, config}",
    )
    mode = serializers.ChoiceField(
        choices=Mode.choices, required=False,
        help_text="How the agents work together. Default: COLLAB_DEFAULT_MODE (parallel).",
    )  # fmt: skip
    synthesis = serializers.ChoiceField(
        choices=Synthesis.choices, required=False,
        help_text="How their answers are combined. Default: COLLAB_DEFAULT_SYNTHESIS "
        "(coordinator).",
    )  # fmt: skip
    coordinator_config = LLMConfigSerializer(
        required=False, help_text="The coordinator's LLM settings"
    )
    # Free-form by seed 004's contract: the one object here that stays open.
    context = JSONObjectField(
        required=False,
        help_text="Shared context passed to all agents (an object, or it as JSON text)",
    )
    max_parallel = serializers.IntegerField(
        required=False, min_value=1, help_text="At most this many agents at once."
    )
    agent_timeout = serializers.FloatField(required=False, help_text="Seconds per agent.")
    max_total_tokens = serializers.IntegerField(
        required=False, min_value=1, help_text="Token budget of the session."
    )
    max_cost_usd = serializers.DecimalField(
        required=False, max_digits=19, decimal_places=9, min_value=0, coerce_to_string=True,
        help_text="A budget of the session's own, in USD: it is refused up front (409 "
        "budget_exhausted) if its estimate does not fit, and no call may cross it.",
    )  # fmt: skip


class SessionIdSerializer(serializers.Serializer):
    """The `get_collaboration` tool: the session its REST path names."""

    session_id = serializers.CharField(help_text="The session's id")


class ContributionSerializer(serializers.ModelSerializer):
    agent = serializers.CharField(source="agent_key")
    name = serializers.CharField(source="display_name")
    is_org_agent = serializers.SerializerMethodField()
    duration_ms = serializers.IntegerField(allow_null=True)
    tools = serializers.SerializerMethodField()
    turns = serializers.SerializerMethodField(
        help_text="An agent with tools: its model turns and tool calls (arguments, result or "
        "error) in order. A tool's result is shown to humans of the organization and to the "
        "agent it ran as; to other agents it is left out (`result_hidden: true`)."
    )

    class Meta:
        model = Contribution
        fields = [
            "agent", "name", "is_org_agent", "role", "focus", "subtask", "status", "response",
            "verdict", "confidence", "tokens_used", "prompt_tokens", "completion_tokens",
            "attempts", "provider", "model", "error", "started_at", "finished_at", "duration_ms",
            "tools", "turns",
        ]  # fmt: skip

    def get_is_org_agent(self, obj) -> bool:
        return obj.agent_id is not None

    def get_tools(self, obj) -> list[str]:
        return list((obj.config or {}).get("tools", []))

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_turns(self, obj) -> list[dict]:
        turns = obj.turns or []
        if not turns or may_read_tool_results(self._viewer(), obj.session, obj):
            return turns
        return [
            {k: v for k, v in t.items() if k != "result"} | {"result_hidden": True}
            if "result" in t
            else t
            for t in turns
        ]

    def _viewer(self):
        """Who reads: the caller the tool door passes, else the request's."""
        if "caller" in self.context:
            return self.context["caller"]
        request = self.context.get("request")
        return resolve_caller(request) if request is not None else None


class SessionEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = SessionEvent
        fields = ["name", "data", "created_at"]


class ProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField()


def progress_of(session: CollaborationSession) -> dict:
    contributions = list(session.contributions.all())
    done = sum(c.is_finished for c in contributions)
    return {"done": done, "total": len(contributions)}


class SessionListSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()

    class Meta:
        model = CollaborationSession
        fields = [
            "id", "url", "status", "task", "mode", "synthesis", "created_by", "progress",
            "created_at", "started_at", "finished_at",
        ]  # fmt: skip

    def get_url(self, obj) -> str:
        path = reverse("collaboration-detail", args=[obj.pk])
        return absolute_url(self.context.get("request"), path)

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, obj) -> dict:
        return progress_of(obj)


class SessionSerializer(SessionListSerializer):
    contributions = ContributionSerializer(many=True)
    events = SessionEventSerializer(many=True)
    consensus = serializers.SerializerMethodField()
    metadata = serializers.SerializerMethodField()
    limits = serializers.SerializerMethodField()

    class Meta(SessionListSerializer.Meta):
        fields = SessionListSerializer.Meta.fields + [
            "result", "error", "cancel_requested", "context", "coordinator_config", "limits",
            "consensus", "metadata", "contributions", "events",
        ]  # fmt: skip

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_consensus(self, obj) -> dict:
        if obj.consensus:
            return obj.consensus
        return {
            "agents_count": 0,
            "has_consensus": False,
            "agreement_score": None,
            "key_agreements": [],
            "key_disagreements": [],
        }

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_metadata(self, obj) -> dict:
        base = {"agents_count": len(obj.contributions.all()), "mode": obj.mode,
                "synthesis": obj.synthesis, "duration_ms": None,
                "total_tokens": session_total_tokens(obj, obj.contributions.all())}  # fmt: skip
        # What its model calls cost so far, from the ledger (costs), and its own limit if any.
        base["cost_usd"] = str(cost_of_session(obj.pk))
        return {**base, **obj.metadata}

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_limits(self, obj) -> dict:
        return {
            "max_parallel": obj.max_parallel,
            "agent_timeout": obj.agent_timeout,
            "max_total_tokens": obj.max_total_tokens,
        }


class EstimateBudgetSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="Null: the request's max_cost_usd.")
    scope = serializers.CharField()
    subject = serializers.CharField()
    estimated_cost_usd = UsdField()
    remaining_usd = UsdField(
        allow_null=True, help_text="Null for an agent when the budget does not cover its own calls."
    )
    fits = serializers.BooleanField()


class EstimateSerializer(serializers.Serializer):
    """`POST /api/collaborations/estimate`: the worst case of the calls it plans."""

    estimated_cost_usd = UsdField()
    estimated_tokens = serializers.IntegerField()
    unpriced_models = serializers.ListField(
        child=serializers.CharField(), help_text="Models with no known price (counted as 0)."
    )
    budgets = EstimateBudgetSerializer(many=True)
