"""Shapes of the tasks API (no business logic here: the services decide)."""

import functools
import json

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from infrastructure.inputs import BIGINT_MAX
from organization.serializers import JSONObjectField

from .models import (
    COMMENT_MAX_LENGTH,
    DESCRIPTION_MAX_LENGTH,
    MAX_WAIT_SECONDS,
    NOTE_MAX_LENGTH,
    RESULT_DATA_MAX_BYTES,
    RESULT_MAX_LENGTH,
    Decision,
    InboxItem,
    Task,
    TaskComment,
    TaskEvent,
    TaskStatus,
    Urgency,
)
from .services import RESULT_STATUSES, TRANSITIONS

# The statuses a status move can reach (the targets of the lifecycle).
SETTABLE_STATUSES = frozenset().union(*TRANSITIONS.values())


class NullIsNotGiven:
    """A field mixin: null is "not given" (the field's default, or left out), at every door.

    A strict-mode tool client sends null for each optional param it leaves out, and the tool
    door drops a null the param's schema refuses; REST takes the same null with the same
    meaning ("inputs defined once"), and the schema says the field is nullable."""

    def __init__(self, **kwargs):
        super().__init__(allow_null=True, **kwargs)

    def validate_empty_values(self, data):
        return super().validate_empty_values(empty if data is None else data)


class OptionalCharField(NullIsNotGiven, serializers.CharField):
    pass


class OptionalJSONObjectField(NullIsNotGiven, JSONObjectField):
    pass


class OptionalChoiceField(NullIsNotGiven, serializers.ChoiceField):
    pass


class OptionalBooleanField(NullIsNotGiven, serializers.BooleanField):
    pass


def note_field(help_text: str = "A note for the task's log.") -> serializers.CharField:
    return OptionalCharField(
        max_length=NOTE_MAX_LENGTH, required=False, allow_blank=True, default="",
        help_text=help_text,
    )  # fmt: skip


# --- the inputs of the task moves: the REST bodies; each tool adds the path's task_id --------


class TaskCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=300, help_text="What to do.")
    description = OptionalCharField(
        max_length=DESCRIPTION_MAX_LENGTH, required=False, allow_blank=True, default="",
        help_text="Details of the work.",
    )  # fmt: skip
    required_expertise = OptionalCharField(
        max_length=100, required=False, allow_blank=True, default="",
        help_text="The expertise it needs.",
    )  # fmt: skip
    urgency = OptionalChoiceField(
        choices=Urgency.choices, required=False, default=Urgency.NORMAL, help_text="Default normal."
    )
    deadline = serializers.DateTimeField(
        required=False, allow_null=True, default=None, help_text="When it is due, ISO 8601."
    )
    agent_id = serializers.CharField(
        required=False, allow_null=True, default=None, help_text="Assignee's id; omit to queue."
    )
    parent = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=BIGINT_MAX,
        help_text="Make it a subtask of this task: the id of a task you hold (a human: any task).",
    )  # fmt: skip


class SubtaskCreateSerializer(TaskCreateSerializer):
    """`create_subtask`: POST /api/tasks's body with its `parent` required."""

    parent = serializers.IntegerField(
        min_value=1, max_value=BIGINT_MAX,
        help_text="The parent task: the id of a task you hold (a human: any task).",
    )  # fmt: skip


class AssignSerializer(serializers.Serializer):
    agent_id = serializers.CharField(
        required=False, allow_null=True, default=None,
        help_text="Assignee's id; omit to claim the task as the calling agent.",
    )  # fmt: skip


class DecisionSerializer(serializers.Serializer):
    """Seed 001's DELEGATION DECISION fields, stored on the move's TaskEvent."""

    primary_reason = note_field("Why your primary choice (its reason).")
    fallback = note_field("Your fallback choice and its reason.")
    reasoning = note_field("Your reasoning, 1-2 sentences.")
    notes = note_field("Special context (the decision's Notes).")


class DelegateSerializer(DecisionSerializer):
    agent_id = serializers.CharField(help_text="To whom: an agent's id (handle), e.g. agent-alex.")


class QueueSerializer(DecisionSerializer):
    agent_id = serializers.CharField(help_text="The busy expert to queue it for (an agent's id).")
    wait_time_seconds = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=0, max_value=MAX_WAIT_SECONDS,
        help_text="Your wait estimate (the decision's Wait Time); omit for the service's estimate.",
    )  # fmt: skip


class EscalateSerializer(DecisionSerializer):
    reason = note_field(
        "Why you escalate; kept as the decision's reasoning when reasoning is omitted."
    )


class ResultSerializer(serializers.Serializer):
    """What a task carries when it is completed or failed (issue 11 §1)."""

    result = OptionalCharField(
        max_length=RESULT_MAX_LENGTH, required=False, allow_blank=True, default="",
        help_text="With completed or failed: the outcome in words, for whoever gave you the task.",
    )  # fmt: skip
    result_data = OptionalJSONObjectField(
        required=False,
        help_text=(
            "With completed or failed: the outcome as a JSON object (e.g. links, figures), "
            f"or that object as JSON text; at most {RESULT_DATA_MAX_BYTES:,} bytes."
        ),
    )

    def validate_result_data(self, value: dict) -> dict:
        if len(json.dumps(value, ensure_ascii=False).encode()) > RESULT_DATA_MAX_BYTES:
            raise serializers.ValidationError(
                f"Ensure this object has no more than {RESULT_DATA_MAX_BYTES} bytes as JSON."
            )
        return value


class StatusSerializer(ResultSerializer):
    status = serializers.ChoiceField(
        choices=TaskStatus.values, help_text="The new status (completed and failed are final)."
    )
    note = note_field()


class CancelSerializer(serializers.Serializer):
    reason = note_field("Why you cancel it.")
    cancel_subtasks = OptionalBooleanField(
        required=False, default=False,
        help_text="Cancel its open subtasks (at any depth) with it; without it, a task with "
        "open subtasks is refused (409 open_subtasks).",
    )  # fmt: skip


class CommentSerializer(serializers.Serializer):
    body = serializers.CharField(
        max_length=COMMENT_MAX_LENGTH, help_text="What you say to the others on the task."
    )


class TaskIdSerializer(serializers.Serializer):
    """A tool names the task the REST path names."""

    task_id = serializers.IntegerField(help_text="The task's id.")


class AssignParamsSerializer(TaskIdSerializer, AssignSerializer):
    pass


class DelegateParamsSerializer(TaskIdSerializer, DelegateSerializer):
    pass


class QueueParamsSerializer(TaskIdSerializer, QueueSerializer):
    pass


class EscalateParamsSerializer(TaskIdSerializer, EscalateSerializer):
    pass


class StatusParamsSerializer(TaskIdSerializer, StatusSerializer):
    # The tool offers only the statuses a move can reach (an LLM needs not try the others);
    # REST takes any status and answers 409 for a move the lifecycle does not allow.
    status = serializers.ChoiceField(
        choices=[s for s in TaskStatus.values if s in SETTABLE_STATUSES],
        help_text="The new status (completed and failed are final).",
    )


class CompleteParamsSerializer(TaskIdSerializer, StatusSerializer):
    """`complete_task`: the status move to completed (or failed), with the result."""

    status = serializers.ChoiceField(
        choices=list(RESULT_STATUSES), required=False, default=TaskStatus.COMPLETED,
        help_text="completed (default) or failed.",
    )  # fmt: skip


class CancelParamsSerializer(TaskIdSerializer, CancelSerializer):
    pass


class CommentParamsSerializer(TaskIdSerializer, CommentSerializer):
    pass


class CommentListParamsSerializer(TaskIdSerializer):
    limit = serializers.IntegerField(
        required=False, default=100, min_value=1, max_value=500, help_text="At most (default 100)."
    )
    offset = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=BIGINT_MAX,
        help_text="Skip this many, oldest first (default 0).",
    )  # fmt: skip


# --- the tools' own reads -------------------------------------------------------------------

# get_my_tasks' `role`: the caller's relation to a task, by the Task field that holds it.
TASK_RELATIONS = {"assigned": "assignee", "queued_for": "queued_for", "created": "created_by_agent"}
ALL = "all"


def limit_field() -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False, default=100, min_value=1, max_value=500, help_text="At most (default 100)."
    )


class MyTasksParamsSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=TaskStatus.values, required=False, help_text="Only this status."
    )
    role = serializers.ChoiceField(
        choices=[ALL, *TASK_RELATIONS], required=False, default=ALL,
        help_text="Which relation to you (default all).",
    )  # fmt: skip
    limit = limit_field()


class InboxParamsSerializer(serializers.Serializer):
    unread_only = serializers.BooleanField(required=False, help_text="Only unread items.")
    mark_read = serializers.BooleanField(required=False, help_text="Mark the returned items read.")
    limit = limit_field()


class TaskSerializer(serializers.ModelSerializer):
    """A task, as lists and moves answer it (its detail adds its subtasks)."""

    assignee = serializers.SlugRelatedField(slug_field="handle", read_only=True, allow_null=True)
    queued_for = serializers.SlugRelatedField(slug_field="handle", read_only=True, allow_null=True)
    created_by_agent = serializers.SlugRelatedField(
        slug_field="handle", read_only=True, allow_null=True
    )
    delegation_chain = serializers.ListField(child=serializers.CharField(), read_only=True)
    estimated_wait_seconds = serializers.SerializerMethodField()
    parent = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="The id of the task this is a subtask of."
    )
    result = serializers.CharField(
        read_only=True, help_text="Given when it was completed or failed; empty until then."
    )
    result_data = serializers.DictField(
        read_only=True, allow_null=True, help_text="Given with the result, or null."
    )

    class Meta:
        model = Task
        fields = [
            "id", "title", "description", "required_expertise", "urgency", "deadline", "status",
            "assignee", "queued_for", "created_by_agent", "delegation_chain",
            "estimated_wait_seconds", "parent", "result", "result_data", "created_at",
            "updated_at",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_estimated_wait_seconds(self, task: Task) -> int | None:
        waits = self.context.get("waits")
        if waits is None:
            from .selectors import estimated_waits

            waits = estimated_waits([task])
        return waits.get(task.pk)


@functools.cache
def _task_representer() -> TaskSerializer:
    return TaskSerializer()


def task_data(task: Task) -> dict:
    """One task as `TaskSerializer(task).data` answers it, by a serializer whose fields were built
    once: a ModelSerializer builds its fields from the model for every instance, a fifth of a
    move's CPU. Its fields only read the task (no context), so one instance serves every thread."""
    return _task_representer().to_representation(task)


class SubtaskSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=TaskStatus.choices)
    assignee = serializers.CharField(allow_null=True, help_text="The holder's id (handle).")
    result = serializers.CharField(allow_blank=True)


class SubtaskProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField(help_text="Finished: completed, failed or cancelled.")
    total = serializers.IntegerField()


# What a task tree cost: the one function the costs app (above this one) registers from its
# AppConfig.ready, so this app shows the figure without importing the ledger.
TASK_COST: list = []


def register_task_cost(function) -> None:
    TASK_COST[:] = [function]


class TaskDetailSerializer(TaskSerializer):
    """`GET /api/tasks/<id>` and `get_task`: the task with its subtasks (the oldest
    SUBTASKS_LISTED) and their progress over all of them. Pass `subtasks` (selectors.Subtasks)
    in the context."""

    subtasks = serializers.SerializerMethodField()
    subtask_progress = serializers.SerializerMethodField()
    cost_usd = serializers.SerializerMethodField(
        help_text="What the model calls made for this task and its subtasks cost, in USD "
        "(the cost ledger); null where the service runs without one."
    )

    class Meta(TaskSerializer.Meta):
        fields = [*TaskSerializer.Meta.fields, "subtasks", "subtask_progress", "cost_usd"]
        read_only_fields = fields

    def get_cost_usd(self, task: Task) -> str | None:
        cost = TASK_COST[0](task) if TASK_COST else None
        return None if cost is None else str(cost)

    @extend_schema_field(SubtaskSerializer(many=True))
    def get_subtasks(self, task: Task) -> list[dict]:
        return self.context["subtasks"].listed

    @extend_schema_field(SubtaskProgressSerializer)
    def get_subtask_progress(self, task: Task) -> dict:
        subtasks = self.context["subtasks"]
        return {"done": subtasks.done, "total": subtasks.total}


def task_detail(task: Task) -> dict:
    """The JSON of `TaskDetailSerializer` (REST and `get_task`): one query for the subtasks."""
    from .selectors import subtasks_of

    return TaskDetailSerializer(task, context={"subtasks": subtasks_of(task)}).data


class TaskCommentSerializer(serializers.ModelSerializer):
    author = serializers.SlugRelatedField(
        slug_field="handle", read_only=True, allow_null=True,
        help_text="The agent who wrote it; null for a human (see author_label).",
    )  # fmt: skip
    author_label = serializers.CharField(read_only=True, help_text="Who wrote it, in words.")

    class Meta:
        model = TaskComment
        fields = ["id", "task", "author", "author_label", "body", "created_at"]
        read_only_fields = fields


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


class RecommendationParamsSerializer(serializers.Serializer):
    """Seed 001's delegation framework: the `recommend_delegate` tool's params."""

    expertise = serializers.CharField(help_text="The expertise the task needs.")
    urgency = OptionalChoiceField(
        choices=Urgency.choices, required=False, default=Urgency.NORMAL, help_text="Default normal."
    )
    exclude = serializers.ListField(
        child=serializers.CharField(), required=False, default=list,
        help_text="Agent ids to leave out.",
    )  # fmt: skip
    agent = serializers.CharField(
        required=False, allow_blank=True, help_text="Organization keys and admins: for which agent."
    )


class RecommendationQuerySerializer(RecommendationParamsSerializer):
    """`GET /api/recommendations`: the same params, `exclude` written in one query value."""

    exclude = serializers.CharField(
        required=False, default="", allow_blank=True, help_text="Comma-separated agent ids."
    )

    def validate_exclude(self, value: str) -> list[str]:
        return [h.strip() for h in value.split(",") if h.strip()]


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
    held_for_budget = serializers.CharField(
        allow_null=True,
        help_text="Why a budget holds this managed agent back (its runs wait), in words; null "
        "when none does.",
    )


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
        help_text="The primary choice is neither on the asking agent's team nor down its "
        "reporting line (note the coordination)."
    )
    candidates = CandidateSerializer(many=True)
    decision_text = serializers.CharField()
