"""Writes of the tasks engine, one module per concern; the public services are re-exported here."""

from .changes import apply_escalation
from .checks import RESULT_STATUSES, TRANSITIONS, invalid_transition
from .comments import inbox_mark_read, task_comment
from .decisions import (
    decision_approve,
    decision_ask,
    decision_cancel,
    decision_close,
    decisions_sweep,
)
from .gate import AwaitingApproval
from .leaving import AGENT_POINTERS, agent_work_escalate, escalate_work_of_leaving_agent
from .moves import (
    task_assign,
    task_cancel,
    task_create,
    task_delegate,
    task_escalate,
    task_queue,
    task_set_status,
)
from .policies import policy_create, policy_delete, policy_update
from .queue import fill_from_queue

__all__ = [
    "AwaitingApproval",
    "decision_approve",
    "decision_ask",
    "decision_cancel",
    "decision_close",
    "decisions_sweep",
    "policy_create",
    "policy_delete",
    "policy_update",
    "AGENT_POINTERS",
    "RESULT_STATUSES",
    "TRANSITIONS",
    "agent_work_escalate",
    "apply_escalation",
    "escalate_work_of_leaving_agent",
    "fill_from_queue",
    "inbox_mark_read",
    "invalid_transition",
    "task_assign",
    "task_cancel",
    "task_comment",
    "task_create",
    "task_delegate",
    "task_escalate",
    "task_queue",
    "task_set_status",
]
