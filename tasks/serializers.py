"""Shapes of the tasks API (no business logic here: the services decide)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from organization.inputs import BIGINT_MAX

from .models import (
    DESCRIPTION_MAX_LENGTH,
    MAX_WAIT_SECONDS,
    NOTE_MAX_LENGTH,
    Decision,
    InboxItem,
    Task,
    TaskEvent,
    TaskStatus,
    Urgency,
)


def note_field() -> serializers.CharField:
    return serializers.CharField(
        max_length=NOTE_MAX_LENGTH, required=False, allow_blank=True, default=""
    )


MOVABLE_STATUSES = [
    TaskStatus.IN_PROGRESS,
    TaskStatus.BLOCKED,
    TaskStatus.COMPLETED,
    TaskStatus.FAILED,
]


class TaskCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=300)
    description = serializers.CharField(
        max_length=DESCRIPTION_MAX_LENGTH, required=False, allow_blank=True, default=""
    )
    required_expertise = serializers.CharField(
        max_length=100, required=False, allow_blank=True, default=""
    )
    urgency = serializers.ChoiceField(
        choices=Urgency.choices, required=False, default=Urgency.NORMAL
    )
    deadline = serializers.DateTimeField(required=False, allow_null=True, default=None)
    agent_id = serializers.CharField(
        required=False, allow_null=True, default=None, help_text="Assignee's id; omit to queue."
    )


class AssignSerializer(serializers.Serializer):
    agent_id = serializers.CharField(
        required=False, allow_null=True, default=None,
        help_text="Assignee's id; omit to claim the task as the calling agent.",
    )  # fmt: skip


class DecisionSerializer(serializers.Serializer):
    """Seed 001's DELEGATION DECISION fields, stored on the move's TaskEvent."""

    primary_reason = note_field()
    fallback = note_field()
    reasoning = note_field()
    notes = note_field()


class DelegateSerializer(DecisionSerializer):
    agent_id = serializers.CharField()


class QueueSerializer(DecisionSerializer):
    agent_id = serializers.CharField()
    wait_time_seconds = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=0, max_value=MAX_WAIT_SECONDS,
        help_text="Your wait estimate (the decision's Wait Time); omit for the service's estimate.",
    )  # fmt: skip


class EscalateSerializer(DecisionSerializer):
    reason = serializers.CharField(
        max_length=NOTE_MAX_LENGTH, required=False, allow_blank=True, default="",
        help_text="Why you escalate; kept as the decision's reasoning when reasoning is omitted.",
    )  # fmt: skip


class StatusSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=[s.value for s in TaskStatus])
    note = note_field()


class CancelSerializer(serializers.Serializer):
    reason = note_field()


class TaskSerializer(serializers.ModelSerializer):
    assignee = serializers.SlugRelatedField(slug_field="handle", read_only=True, allow_null=True)
    queued_for = serializers.SlugRelatedField(slug_field="handle", read_only=True, allow_null=True)
    created_by_agent = serializers.SlugRelatedField(
        slug_field="handle", read_only=True, allow_null=True
    )
    delegation_chain = serializers.ListField(child=serializers.CharField(), read_only=True)
    estimated_wait_seconds = serializers.SerializerMethodField()

    class Meta:
        model = Task
        fields = [
            "id", "title", "description", "required_expertise", "urgency", "deadline", "status",
            "assignee", "queued_for", "created_by_agent", "delegation_chain",
            "estimated_wait_seconds", "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_estimated_wait_seconds(self, task: Task) -> int | None:
        waits = self.context.get("waits")
        if waits is None:
            from .selectors import estimated_waits

            waits = estimated_waits([task])
        return waits.get(task.pk)


class TaskEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_label")
    actor_agent = serializers.SlugRelatedField(slug_field="handle", read_only=True, allow_null=True)
    recipient = serializers.SlugRelatedField(slug_field="handle", read_only=True, allow_null=True)
    decision = serializers.ChoiceField(choices=Decision.choices, allow_blank=True)

    class Meta:
        model = TaskEvent
        fields = [
            "id", "task", "kind", "actor_kind", "actor", "actor_agent", "recipient", "before",
            "after", "message", "decision", "primary_choice", "primary_reason", "fallback",
            "reasoning", "wait_time_seconds", "notes", "cross_team", "coordination_note",
            "created_at",
        ]  # fmt: skip
        read_only_fields = fields


class InboxItemSerializer(serializers.ModelSerializer):
    task = serializers.SerializerMethodField()
    read = serializers.BooleanField(source="is_read")
    actor = serializers.CharField(source="event.actor_label")

    class Meta:
        model = InboxItem
        fields = ["id", "kind", "message", "actor", "task", "read", "read_at", "created_at"]
        read_only_fields = fields

    @extend_schema_field(
        {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "title": {"type": "string"},
                "status": {"type": "string"},
                "urgency": {"type": "string"},
            },
        }
    )
    def get_task(self, item: InboxItem) -> dict:
        t = item.task
        return {"id": t.pk, "title": t.title, "status": t.status, "urgency": t.urgency}


class InboxPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = InboxItemSerializer(many=True)


class InboxQuerySerializer(serializers.Serializer):
    unread = serializers.BooleanField(required=False, allow_null=True, default=None)


class InboxReadSerializer(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=BIGINT_MAX), max_length=500,
        required=False, allow_null=True, default=None,
        help_text="Items to mark read; omit to mark every unread item read.",
    )  # fmt: skip


class RecommendationQuerySerializer(serializers.Serializer):
    expertise = serializers.CharField()
    urgency = serializers.ChoiceField(
        choices=Urgency.choices, required=False, default=Urgency.NORMAL
    )
    exclude = serializers.CharField(
        required=False, default="", allow_blank=True, help_text="Comma-separated agent ids."
    )
    agent = serializers.CharField(
        required=False, help_text="Organization keys and admins: for which agent."
    )


class CandidateSerializer(serializers.Serializer):
    id = serializers.CharField(allow_null=True)
    name = serializers.CharField()
    role = serializers.CharField(allow_blank=True)
    team = serializers.CharField(allow_null=True)
    tier = serializers.IntegerField()
    tier_name = serializers.CharField()
    reason = serializers.CharField()
    status = serializers.CharField(allow_null=True)
    current_workload = serializers.IntegerField(allow_null=True)
    workload_capacity = serializers.IntegerField(allow_null=True)
    availability_until = serializers.DateTimeField(
        allow_null=True, help_text="When the colleague expects to be free (their own estimate)."
    )
    estimated_wait_seconds = serializers.IntegerField(allow_null=True)


class RecommendationSerializer(serializers.Serializer):
    expertise = serializers.CharField()
    urgency = serializers.CharField()
    related_expertise = serializers.ListField(child=serializers.CharField())
    decision = serializers.ChoiceField(choices=Decision.choices)
    primary_choice = CandidateSerializer()
    fallback = CandidateSerializer(allow_null=True)
    escalate_to = CandidateSerializer()
    reasoning = serializers.CharField()
    cross_team = serializers.BooleanField(
        help_text="The primary choice is not on the asking agent's team (note the coordination)."
    )
    candidates = CandidateSerializer(many=True)
    decision_text = serializers.CharField()
