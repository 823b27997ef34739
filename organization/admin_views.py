"""Admin-only reads and pages: tenant scoping for staff, the org chart.

The admin's writes go through organization/services.py (pause/resume, API keys).
"""

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse

from tasks.models import HELD_STATUSES, Task, TaskStatus

from .caller import admin_organizations
from .models import Agent, AgentStatus, Organization, status_for
from .selectors import agents_of

# Colours of the status badge and the org chart; the same four words as the roster's status.
STATUS_COLOURS = {
    AgentStatus.IDLE: "#2e7d32",
    AgentStatus.ACTIVE: "#1565c0",
    AgentStatus.BUSY: "#e65100",
    AgentStatus.OFFLINE: "#757575",
}


def admin_org_ids(request) -> set[int] | None:
    """Ids of the organizations the user may edit in the admin; None means all (superuser).

    Cached on the request: every permission check of one admin page asks it again.
    """
    user = request.user
    if user.is_active and user.is_superuser:
        return None
    cached = getattr(request, "_admin_org_ids", None)
    if cached is None:
        if user.is_active and user.is_staff:
            cached = set(admin_organizations(user).values_list("pk", flat=True))
        else:
            cached = set()
        request._admin_org_ids = cached
    return cached


def count_of(rows: QuerySet, column: str) -> Coalesce:
    """A correlated COUNT of `rows` whose `column` is the outer row, 0 when none.

    A subquery, so two counts on one queryset never multiply each other's rows.
    """
    counted = (
        rows.filter(**{column: OuterRef("pk")})
        .order_by()
        .values(column)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def org_chart_agents(*, org: Organization) -> QuerySet[Agent]:
    """Every agent of `org` with its workload (tasks held) and queue length, in one query."""
    return (
        agents_of(org=org)
        .select_related("team", "hierarchy_role")
        .annotate(
            current_workload=count_of(Task.objects.filter(status__in=HELD_STATUSES), "assignee"),
            queue_length=count_of(Task.objects.filter(status=TaskStatus.QUEUED), "queued_for"),
        )
        .order_by("name", "handle")
    )


@dataclass
class ChartNode:
    agent: Agent
    depth: int
    status: str = ""
    colour: str = ""
    percent: int = 0
    workload: str = ""
    team: str = ""
    role: str = ""
    has_children: bool = False
    # How many nested lists end after this node (the template closes them).
    closes: range = field(default_factory=lambda: range(0))


def build_chart(agents: list[Agent]) -> list[ChartNode]:
    """The seniors' tree flattened depth-first; roots are agents without a senior.

    Agents the walk cannot reach (a cycle written around model validation) become roots,
    so every agent is shown exactly once.
    """
    by_pk = {agent.pk: agent for agent in agents}
    reports: dict[int, list[Agent]] = defaultdict(list)
    for agent in agents:
        if agent.senior_id in by_pk:
            reports[agent.senior_id].append(agent)
    roots = [agent for agent in agents if agent.senior_id not in by_pk]
    order: list[tuple[Agent, int]] = []
    seen: set[int] = set()

    def walk(starts: list[Agent]) -> None:
        stack = [(agent, 0) for agent in reversed(starts)]
        while stack:
            agent, depth = stack.pop()
            if agent.pk in seen:
                continue
            seen.add(agent.pk)
            order.append((agent, depth))
            stack.extend((child, depth + 1) for child in reversed(reports[agent.pk]))

    walk(roots)
    walk([agent for agent in agents if agent.pk not in seen])

    nodes = []
    for index, (agent, depth) in enumerate(order):
        next_depth = order[index + 1][1] if index + 1 < len(order) else 0
        status = status_for(
            is_paused=agent.is_paused,
            workload=agent.current_workload,
            capacity=agent.workload_capacity,
        )
        capacity = agent.workload_capacity
        percent = 100 if not capacity else min(100, agent.current_workload * 100 // capacity)
        role = getattr(getattr(agent, "hierarchy_role", None), "role", "")
        nodes.append(
            ChartNode(
                agent=agent,
                depth=depth,
                status=status,
                colour=STATUS_COLOURS[status],
                percent=percent,
                workload=f"{agent.current_workload}/{capacity}",
                team=agent.team.name if agent.team_id else "",
                role=role,
                has_children=next_depth > depth,
                closes=range(max(0, depth - next_depth)),
            )
        )
    return nodes


def org_chart_view(request, model_admin, object_id: int) -> TemplateResponse:
    """The org chart of one organization; another organization's chart is a 404."""
    org = model_admin.get_queryset(request).filter(pk=object_id).first()
    if org is None or not model_admin.has_view_permission(request, org):
        raise Http404("No such organization.")
    nodes = build_chart(list(org_chart_agents(org=org)))
    totals = defaultdict(int)
    for node in nodes:
        totals[node.status] += 1
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": f"Org chart of {org.name}",
        "organization": org,
        "nodes": nodes,
        # One reverse() for the page, not one per agent: the chart may hold thousands.
        "agent_url": reverse("admin:organization_agent_changelist"),
        "legend": [
            (status.value, STATUS_COLOURS[status], totals[status]) for status in AgentStatus
        ],
    }
    return TemplateResponse(request, "organization/org_chart.html", context)
