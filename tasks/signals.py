"""What the tasks engine tells the rest of the system: work reached an agent.

`work_reached_agent` is sent (`tasks.wakes`) after the move commits, for each inbox item that
asks its agent to act; runtime/receivers.py wakes managed agents with it (docs/tasks.md).
"""

from django.dispatch import Signal

# Receivers get `agent` (organization.Agent), `trigger` (one of WAKING_KINDS, the inbox item's
# kind) and `task` (tasks.Task; from the stale sweep a deferred instance, its fields but the id
# read when first used); the sender is the Task class.
work_reached_agent = Signal()

# The inbox kinds that wake an agent (the values of tasks.models.EventKind). `created` is a task
# assigned to the agent when it was created; `queued` does not wake (the agent has no room), the
# refill that later gives it the task (`auto_assigned`) does; a task finishing (`status_changed`)
# informs its creator and delegator without asking them to act.
WAKING_KINDS = frozenset(
    {
        "created",
        "assigned",
        "auto_assigned",
        "delegated",
        "escalated",
        "comment",
        "subtasks_done",
        # A decision the agent asked for was taken (docs/decisions.md).
        "decision",
    }
)
