"""Shapes of the collaboration API (data only: validation of a start is in services.py)."""

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from organization.links import absolute_url

from .models import CollaborationSession, Contribution, Mode, SessionEvent, Synthesis


class LLMConfigSerializer(serializers.Serializer):
    provider = serializers.ChoiceField(choices=["offline", "openai", "anthropic"], required=False)
    model = serializers.CharField(required=False)
    temperature = serializers.FloatField(required=False, min_value=0, max_value=2)
    max_tokens = serializers.IntegerField(required=False, min_value=1)
    system_prompt = serializers.CharField(required=False, help_text="Ad-hoc specialists only.")


class AgentItemSerializer(serializers.Serializer):
    agent_id = serializers.CharField(
        required=False, help_text="An agent of the organization (its handle), or give `name`."
    )
    name = serializers.CharField(required=False, help_text="An ad-hoc specialist's name.")
    role = serializers.CharField(required=False)
    focus = serializers.CharField(required=False)
    config = LLMConfigSerializer(required=False)


class StartCollaborationSerializer(serializers.Serializer):
    """Seed 004's contract plus optional per-session limits (only lower than the server's)."""

    task = serializers.CharField()
    agents = AgentItemSerializer(many=True)
    mode = serializers.ChoiceField(
        choices=Mode.choices, required=False, help_text="Default: COLLAB_DEFAULT_MODE (parallel)."
    )
    synthesis = serializers.ChoiceField(
        choices=Synthesis.choices,
        required=False,
        help_text="Default: COLLAB_DEFAULT_SYNTHESIS (coordinator).",
    )
    coordinator_config = LLMConfigSerializer(required=False)
    context = serializers.DictField(required=False)
    max_parallel = serializers.IntegerField(required=False, min_value=1)
    agent_timeout = serializers.FloatField(required=False, help_text="Seconds per agent.")
    max_total_tokens = serializers.IntegerField(required=False, min_value=1)


class ContributionSerializer(serializers.ModelSerializer):
    agent = serializers.CharField(source="agent_key")
    name = serializers.CharField(source="display_name")
    is_org_agent = serializers.SerializerMethodField()
    duration_ms = serializers.IntegerField(allow_null=True)

    class Meta:
        model = Contribution
        fields = [
            "agent", "name", "is_org_agent", "role", "focus", "subtask", "status", "response",
            "verdict", "confidence", "tokens_used", "prompt_tokens", "completion_tokens",
            "attempts", "provider", "model", "error", "started_at", "finished_at", "duration_ms",
        ]  # fmt: skip

    def get_is_org_agent(self, obj) -> bool:
        return obj.agent_id is not None


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
                "synthesis": obj.synthesis, "total_tokens": 0, "duration_ms": None}  # fmt: skip
        if not obj.is_finished:
            base["total_tokens"] = sum(c.tokens_used for c in obj.contributions.all()) + int(
                obj.metadata.get("synthesis_tokens", 0)
            )
        return {**base, **obj.metadata}

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_limits(self, obj) -> dict:
        return {
            "max_parallel": obj.max_parallel,
            "agent_timeout": obj.agent_timeout,
            "max_total_tokens": obj.max_total_tokens,
        }
