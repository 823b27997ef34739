"""The tasks list's attention filter: what waits on a human, and the reasons apps above add."""

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import admin
from django.db.models import Q
from django.utils import timezone

from ..models import Task, TaskStatus
from ..sql import ids_among
from ..sweep import stale_queued

# What a human must look at: tasks escalated to humans, and blocked ones (a managed agent's run
# that failed blocks its task with the reason, issue 11 §2).
NEEDS_ATTENTION = (TaskStatus.ESCALATED, TaskStatus.BLOCKED)


@dataclass(frozen=True)
class Attention:
    """Another reason a task waits on a human, told by an app above this one (a budget holding
    its holder back): `value` is the list filter's `?attention=` value, `condition()` the tasks
    it selects (a Q over Task)."""

    value: str
    label: str
    condition: Callable[[], Q]


ATTENTION: list[Attention] = []


def register_attention(reason: Attention) -> Attention:
    """Add `reason` to the tasks list's attention filter and to its "Needs attention" choice."""
    if reason.value in ("needs", "stale") or any(a.value == reason.value for a in ATTENTION):
        raise ValueError(f"An attention filter is already named {reason.value!r}.")
    ATTENTION.append(reason)
    return reason


def needs_attention() -> Q:
    """The tasks that wait on a human: escalated, blocked, or held for a registered reason.

    Each reason's tasks are read once, on their own (`ids_among`): its condition in the `OR`
    (a join, `EXISTS` subqueries) made PostgreSQL test every task of the organization, where
    the status reads its index and each reason's few tasks the primary key's.
    """
    condition = Q(status__in=NEEDS_ATTENTION)
    for reason in ATTENTION:
        condition |= ids_among("pk", Task.objects.filter(reason.condition()))
    return condition


class NeedsAttentionFilter(admin.SimpleListFilter):
    title = "attention"
    parameter_name = "attention"

    def lookups(self, request, model_admin):
        why = ["escalated to humans", "blocked", *(reason.label.lower() for reason in ATTENTION)]
        return [
            ("needs", f"Needs attention ({', '.join(why[:-1])} or {why[-1]})"),
            ("stale", "Queued past its threshold or deadline"),
            *[(reason.value, reason.label) for reason in ATTENTION],
        ]

    def queryset(self, request, queryset):
        if self.value() == "needs":
            return queryset.filter(needs_attention())
        if self.value() == "stale":
            return queryset.filter(pk__in=stale_queued(timezone.now()).values("pk"))
        for reason in ATTENTION:
            if self.value() == reason.value:
                return queryset.filter(reason.condition())
        return queryset
