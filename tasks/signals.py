"""What the tasks engine tells the rest of the system: work reached an agent.

`work_reached_agent` is sent by `tasks.events` for every inbox item that asks its agent to act:
a task assigned to it (at creation, by a move, by the queue's refill), delegated or escalated to
it, a comment by someone else on a task it holds or passed on (the expert a queued task only
waits for, or a senior an escalation only queues it for, is told in its inbox, not sent this),
and the last open subtask of a task it holds finished. It is the hook the managed agent runtime wakes its agents with (docs/tasks.md,
"Work reaching an agent"; runtime/receivers.py connects to it).

It is sent once the move's transaction has committed (what the receiver reads is there), with
`send_robust`: a failing receiver is logged and never undoes nor fails the move. What one
transaction announced is sent together, and when it is more than one wake-up, inside one
transaction of its own (`tasks.wakes.WakeBatch`): what the receivers write for all of them
commits at once — an agent that many tasks reach together is woken once for all.
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
    {"created", "assigned", "auto_assigned", "delegated", "escalated", "comment", "subtasks_done"}
)
