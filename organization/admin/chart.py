"""The org chart: one organization's agents as the seniors' tree, with status, workload and
queue (an admin page, linked from the organization's row)."""

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import QuerySet
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse

from ..models import Agent, AgentStatus, Organization
from ..selectors import agents_of
from ..workload import queue_length, status_for, workload_subquery
from .scoping import colour_of


def org_chart_agents(*, org: Organization) -> QuerySet[Agent]:
    """Every agent of `org` with its workload (tasks held) and queue length, in one query."""
    return (
        agents_of(org=org)
        .select_related("team", "hierarchy_role")
        .annotate(current_workload=workload_subquery(), queue_length=queue_length())
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
                colour=colour_of("agent", status),
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
            (status.value, colour_of("agent", status), totals[status]) for status in AgentStatus
        ],
    }
    return TemplateResponse(request, "organization/org_chart.html", context)
