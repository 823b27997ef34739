"""The run record a human can read: what woke the agent, each turn, what it cost."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from costs.serializers import UsdField

from .models import TRIGGERS, Run, RunStatus, RunTrigger


class RunTriggerSerializer(serializers.ModelSerializer):
    task = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    woken_by = serializers.PrimaryKeyRelatedField(
        read_only=True,
        allow_null=True,
        help_text="The run (of another managed agent) whose tool call woke this agent.",
    )

    class Meta:
        model = RunTrigger
        fields = ["trigger", "task", "woken_by", "created_at"]
        read_only_fields = fields


class RunSerializer(serializers.ModelSerializer):
    agent = serializers.SlugRelatedField(slug_field="handle", read_only=True)
    task = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="The task of the trigger that started it."
    )
    trigger = serializers.ChoiceField(choices=[(t, t) for t in TRIGGERS], read_only=True)
    status = serializers.ChoiceField(choices=RunStatus.choices, read_only=True)
    triggers = serializers.SerializerMethodField(
        help_text="Every wake-up the run took in (a follow-up takes all that arrived meanwhile)."
    )
    previous = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="The run this one follows up."
    )
    depth = serializers.IntegerField(
        read_only=True,
        help_text="Its place in its chain of wake-ups: 1 when a human's or outside agent's act "
        "woke it, else one more than the run whose act did (bounded: RUNTIME_MAX_CHAIN_RUNS).",
    )
    turns = serializers.ListField(
        child=serializers.DictField(),
        read_only=True,
        help_text="Each model turn (text, tool_calls, tokens, provider_ms) and tool call "
        "(arguments, status running/ok/error, result or error), in order.",
    )
    outcome = serializers.ListField(
        child=serializers.DictField(),
        read_only=True,
        help_text="What the runtime did with each task once the model stopped.",
    )
    tokens_used = serializers.IntegerField(read_only=True)
    cost_usd = UsdField(
        default=None, help_text="What its model calls cost (the cost ledger), in USD."
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "agent",
            "task",
            "trigger",
            "status",
            "waiting_for",
            "triggers",
            "previous",
            "depth",
            "provider",
            "model",
            "max_turns",
            "turns",
            "prompt_tokens",
            "completion_tokens",
            "tokens_used",
            "cost_usd",
            "outcome",
            "error",
            "attempts",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    @extend_schema_field(RunTriggerSerializer(many=True))
    def get_triggers(self, run: Run) -> list[dict]:
        return RunTriggerSerializer(run.triggers.all(), many=True).data


class RunDetailSerializer(RunSerializer):
    """`GET /api/runs/<id>`: the run with what its model was given."""

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "system_prompt", "input"]
        read_only_fields = fields
