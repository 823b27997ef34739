"""A task as the API answers it (list, move, detail), with its comments and events."""

import functools

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Decision, Task, TaskComment, TaskEvent, TaskStatus
from .fields import limit_field

# get_my_tasks' `role`: the caller's relation to a task, by the Task field that holds it.
TASK_RELATIONS = {"assigned": "assignee", "queued_for": "queued_for", "created": "created_by_agent"}
ALL = "all"


class MyTasksParamsSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=TaskStatus.values, required=False, help_text="Only this status."
    )
    role = serializers.ChoiceField(
        choices=[ALL, *TASK_RELATIONS],
        required=False,
        default=ALL,
        help_text="Which relation to you (default all).",
    )
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
            "id",
            "title",
            "description",
            "required_expertise",
            "urgency",
            "deadline",
            "status",
            "assignee",
            "queued_for",
            "created_by_agent",
            "delegation_chain",
            "estimated_wait_seconds",
            "parent",
            "result",
            "result_data",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_estimated_wait_seconds(self, task: Task) -> int | None:
        waits = self.context.get("waits")
        if waits is None:
            from ..selectors import estimated_waits

            waits = estimated_waits([task])
        return waits.get(task.pk)


@functools.cache
def _task_representer() -> TaskSerializer:
    return TaskSerializer()


def task_data(task: Task) -> dict:
    """One task as `TaskSerializer(task).data` answers it, by a serializer built once (its fields).

    Its fields only read the task (no context), so one instance serves every thread.
    """
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
    from ..selectors import subtasks_of

    return TaskDetailSerializer(task, context={"subtasks": subtasks_of(task)}).data


class TaskCommentSerializer(serializers.ModelSerializer):
    author = serializers.SlugRelatedField(
        slug_field="handle",
        read_only=True,
        allow_null=True,
        help_text="The agent who wrote it; null for a human (see author_label).",
    )
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
            "id",
            "task",
            "kind",
            "actor_kind",
            "actor",
            "actor_agent",
            "recipient",
            "before",
            "after",
            "message",
            "decision",
            "primary_choice",
            "primary_reason",
            "fallback",
            "reasoning",
            "wait_time_seconds",
            "notes",
            "cross_team",
            "coordination_note",
            "created_at",
        ]
        read_only_fields = fields
