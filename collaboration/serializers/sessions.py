"""Shapes of a collaboration session as the API and the tools answer it."""

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from costs.selectors import cost_of_session
from infrastructure.links import absolute_url
from organization.caller import resolve_caller

from ..models import CollaborationSession, Contribution, SessionEvent
from ..selectors import may_read_tool_results, session_total_tokens


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
        base = {
            "agents_count": len(obj.contributions.all()),
            "mode": obj.mode,
            "synthesis": obj.synthesis,
            "duration_ms": None,
            "total_tokens": session_total_tokens(obj, obj.contributions.all()),
        }
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
