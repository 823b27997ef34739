"""The inputs of the task moves: the REST bodies, and the tools' params (each adds `task_id`)."""

import json

from rest_framework import serializers

from infrastructure.inputs import BIGINT_MAX

from ..models import (
    COMMENT_MAX_LENGTH,
    DESCRIPTION_MAX_LENGTH,
    MAX_WAIT_SECONDS,
    RESULT_DATA_MAX_BYTES,
    RESULT_MAX_LENGTH,
    TaskStatus,
    Urgency,
)
from ..services import RESULT_STATUSES
from .fields import (
    SETTABLE_STATUSES,
    OptionalBooleanField,
    OptionalChoiceField,
    OptionalJSONObjectField,
    note_field,
    optional_int,
    optional_text,
)


class TaskCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=300, help_text="What to do.")
    description = optional_text(DESCRIPTION_MAX_LENGTH, "Details of the work.")
    required_expertise = optional_text(100, "The expertise it needs.")
    urgency = OptionalChoiceField(
        choices=Urgency.choices, required=False, default=Urgency.NORMAL, help_text="Default normal."
    )
    deadline = serializers.DateTimeField(
        required=False, allow_null=True, default=None, help_text="When it is due, ISO 8601."
    )
    agent_id = serializers.CharField(
        required=False, allow_null=True, default=None, help_text="Assignee's id; omit to queue."
    )
    parent = optional_int(
        min_value=1,
        max_value=BIGINT_MAX,
        help_text="Make it a subtask of this task: the id of a task you hold (a human: any task).",
    )


class SubtaskCreateSerializer(TaskCreateSerializer):
    """`create_subtask`: POST /api/tasks's body with its `parent` required."""

    parent = serializers.IntegerField(
        min_value=1,
        max_value=BIGINT_MAX,
        help_text="The parent task: the id of a task you hold (a human: any task).",
    )


class AssignSerializer(serializers.Serializer):
    agent_id = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Assignee's id; omit to claim the task as the calling agent.",
    )


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
    wait_time_seconds = optional_int(
        min_value=0,
        max_value=MAX_WAIT_SECONDS,
        help_text="Your wait estimate (the decision's Wait Time); omit for the service's estimate.",
    )


class EscalateSerializer(DecisionSerializer):
    reason = note_field(
        "Why you escalate; kept as the decision's reasoning when reasoning is omitted."
    )


class ResultSerializer(serializers.Serializer):
    """What a task carries when it is completed or failed (issue 11 §1)."""

    result = optional_text(
        RESULT_MAX_LENGTH,
        "With completed or failed: the outcome in words, for whoever gave you the task.",
    )
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
        required=False,
        default=False,
        help_text="Cancel its open subtasks (at any depth) with it; without it, a task with "
        "open subtasks is refused (409 open_subtasks).",
    )


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
        choices=list(RESULT_STATUSES),
        required=False,
        default=TaskStatus.COMPLETED,
        help_text="completed (default) or failed.",
    )


class CancelParamsSerializer(TaskIdSerializer, CancelSerializer):
    pass


class CommentParamsSerializer(TaskIdSerializer, CommentSerializer):
    pass


class CommentListParamsSerializer(TaskIdSerializer):
    limit = serializers.IntegerField(
        required=False, default=100, min_value=1, max_value=500, help_text="At most (default 100)."
    )
    offset = serializers.IntegerField(
        required=False,
        default=0,
        min_value=0,
        max_value=BIGINT_MAX,
        help_text="Skip this many, oldest first (default 0).",
    )
