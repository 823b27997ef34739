"""The org chart page: one organization's agents by team, each team its seniors' tree.

Status, workload and queue on each card, paused agents with reports flagged; one agent query.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import QuerySet
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse

from ..models import Agent, AgentStatus, Organization
from ..selectors import agents_of
from ..workload import queue_length, status_for, workload_subquery
from .display import colour_of, human

# Up to this many agents every team starts unfolded; above it, teams start folded (their
# summary line still tells who is busy, offline or flagged).
OPEN_UP_TO = 60
NO_TEAM = "No team"


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
    status_label: str = ""
    # Direct reports, in the whole organization (a senior may lead another team's agents).
    reports: int = 0
    # An offline agent who still has reports: the people under it escalate past it.
    flagged: bool = False
    # The senior, when it sits outside the tree shown (another team).
    senior_elsewhere: Agent | None = None
    has_children: bool = False
    # How many nested lists end after this node (the template closes them).
    closes: range = field(default_factory=lambda: range(0))


def build_chart(
    agents: list[Agent], everyone: dict[int, Agent] | None = None, reports_of=None
) -> list[ChartNode]:
    """The seniors' tree of `agents` flattened depth-first; roots have no senior among them.

    Agents the walk cannot reach (a cycle written around validation) become roots: each shown once.
    """
    by_pk = {agent.pk: agent for agent in agents}
    everyone = everyone if everyone is not None else by_pk
    if reports_of is None:
        reports_of = defaultdict(int)
        for agent in everyone.values():
            if agent.senior_id is not None:
                reports_of[agent.senior_id] += 1
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
        reports = reports_of[agent.pk]
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
                status_label=human(status),
                reports=reports,
                flagged=agent.is_paused and reports > 0,
                senior_elsewhere=(
                    everyone.get(agent.senior_id)
                    if depth == 0 and agent.senior_id not in by_pk
                    else None
                ),
                has_children=next_depth > depth,
                closes=range(max(0, depth - next_depth)),
            )
        )
    return nodes


@dataclass
class TeamChart:
    team_id: int | None
    name: str
    anchor: str
    nodes: list[ChartNode]
    counts: dict[str, int]
    queued: int = 0
    at_capacity: int = 0
    flagged: int = 0
    is_open: bool = True


def build_team_charts(agents: list[Agent]) -> list[TeamChart]:
    """Each team's tree; the teams in the order of the organization's tree (the team of its top
    first), then by name; agents without a team last."""
    everyone = {agent.pk: agent for agent in agents}
    reports_of: dict[int, int] = defaultdict(int)
    for agent in agents:
        if agent.senior_id in everyone:
            reports_of[agent.senior_id] += 1
    # How high each team reaches in the whole tree (one walk, no query).
    rank: dict[int | None, int] = {}
    for node in build_chart(agents, everyone, reports_of):
        rank[node.agent.team_id] = min(rank.get(node.agent.team_id, node.depth), node.depth)
    members: dict[int | None, list[Agent]] = defaultdict(list)
    for agent in agents:
        members[agent.team_id].append(agent)
    is_open = len(agents) <= OPEN_UP_TO
    teams = []
    for team_id, group in members.items():
        nodes = build_chart(group, everyone, reports_of)
        counts = defaultdict(int)
        for node in nodes:
            counts[node.status] += 1
        name = group[0].team.name if team_id is not None else NO_TEAM
        teams.append(
            TeamChart(
                team_id=team_id,
                name=name,
                anchor=f"team-{team_id}" if team_id is not None else "team-none",
                nodes=nodes,
                counts={status.value: counts[status] for status in AgentStatus},
                queued=sum(node.agent.queue_length for node in nodes),
                at_capacity=sum(
                    1
                    for node in nodes
                    if not node.agent.is_paused
                    and node.agent.current_workload >= node.agent.workload_capacity
                ),
                flagged=sum(node.flagged for node in nodes),
                is_open=is_open,
            )
        )
    teams.sort(key=lambda t: (t.team_id is None, rank.get(t.team_id, 0), t.name))
    return teams


def org_chart_view(request, model_admin, object_id: int) -> TemplateResponse:
    """The org chart of one organization; another organization's chart is a 404."""
    org = model_admin.get_queryset(request).filter(pk=object_id).first()
    if org is None or not model_admin.has_view_permission(request, org):
        raise Http404("No such organization.")
    teams = build_team_charts(list(org_chart_agents(org=org)))
    nodes = [node for team in teams for node in team.nodes]
    totals = defaultdict(int)
    for node in nodes:
        totals[node.status] += 1
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": f"Org chart of {org.name}",
        "organization": org,
        "teams": teams,
        "nodes": nodes,
        # Offline agents who still have reports: their reports escalate past them.
        "flagged": [node for node in nodes if node.flagged],
        # One reverse() for the page, not one per agent: the chart may hold thousands.
        "agent_url": reverse("admin:organization_agent_changelist"),
        "legend": [
            (status.value, human(status), colour_of("agent", status), totals[status])
            for status in AgentStatus
        ],
    }
    return TemplateResponse(request, "organization/org_chart.html", context)
