"""The demo organization at work: its tasks, made through the services like any other.

A story whose task exists is never played again; one the organization no longer allows is
skipped whole, in its own savepoint, and reported.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction

from infrastructure.errors import DomainError, NotFound
from organization.demo import seed_demo_organization
from organization.models import Agent, Organization

from . import services
from .models import ActorKind, Task, TaskStatus, Urgency
from .rules import Actor

# Who "created" the human-created demo tasks, as the audit trail shows it.
DEMO_HUMAN = Actor(ActorKind.USER, "seed_demo")
DEMO_NOTE = "Demo task, made by `manage.py seed_demo` through the task services."

IN_PROGRESS, BLOCKED = TaskStatus.IN_PROGRESS, TaskStatus.BLOCKED

# Held work, handed out by a human: (holder, title, expertise, urgency, moves by the holder).
HELD = [
    ("agent-alice", "Plan the Q3 roadmap", "Planning", Urgency.HIGH, [IN_PROGRESS]),
    ("agent-alice", "Hire a second backend developer", "Leadership", Urgency.NORMAL, []),
    ("agent-alice", "Review the on-call rota", "Leadership", Urgency.NORMAL, [IN_PROGRESS]),
    ("agent-alice", "Prepare the board update", "Planning", Urgency.LOW, []),
    ("agent-sarah", "Build the settings page", "React", Urgency.NORMAL, [IN_PROGRESS]),
    ("agent-sarah", "Fix the login form on Safari", "CSS", Urgency.HIGH, []),
    ("agent-sarah", "Type the API client", "TypeScript", Urgency.NORMAL, [IN_PROGRESS]),
    ("agent-jordan", "Upgrade the Kubernetes cluster", "Kubernetes", Urgency.HIGH, [IN_PROGRESS]),
    ("agent-jordan", "Rotate the Docker registry credentials", "Docker", Urgency.NORMAL, []),
    ("agent-jordan", "Containerise the billing service", "Docker", Urgency.NORMAL, [IN_PROGRESS]),
    ("agent-jordan", "Move the CI runners to AWS spot instances", "AWS", Urgency.NORMAL,
     [IN_PROGRESS, BLOCKED]),
    ("agent-database-lead", "Plan the PostgreSQL 17 upgrade", "PostgreSQL", Urgency.HIGH,
     [IN_PROGRESS]),
    ("agent-database-lead", "Tune the MySQL replica lag", "MySQL", Urgency.NORMAL, [IN_PROGRESS]),
    ("agent-database-lead", "Archive old order rows", "PostgreSQL", Urgency.LOW, []),
    ("agent-database-lead", "Review the Redis persistence settings", "Redis", Urgency.NORMAL, []),
    ("agent-database-lead", "Add PostgreSQL backups to the runbook", "PostgreSQL", Urgency.NORMAL,
     [IN_PROGRESS]),
    ("agent-taylor", "Mock up the settings page", "Figma", Urgency.NORMAL, []),
    ("agent-taylor", "Design the onboarding flow", "Figma", Urgency.NORMAL, [IN_PROGRESS]),
]  # fmt: skip

BLOCKED_NOTE = "Waiting for the AWS quota increase; Sam, who owns the account, is away."

# Delegations, each with seed 001's DELEGATION DECISION: (from, to, title, expertise, decision).
DELEGATIONS = [
    ("agent-sarah", "agent-alex", "Add an index for the invoices query", "PostgreSQL", {
        "primary_reason": "PostgreSQL expertise, same team, 0/5 tasks: no coordination overhead.",
        "fallback": "Morgan (Database Lead), at capacity: queue for them.",
        "reasoning": "Priority 1: a same-team colleague with the exact expertise and room.",
        "notes": "Sarah is a frontend developer; the query is backend work.",
    }),
    ("agent-alice", "agent-jordan", "Set up a staging cluster", "Kubernetes", {
        "primary_reason": "Kubernetes expertise (Infrastructure), 4/5 tasks.",
        "fallback": "Sam (Infrastructure Lead) when back.",
        "reasoning": "Busy but has room (4/5): no available Kubernetes expert in Leadership, "
        "so the busy expert with room, offered after every available colleague.",
        "notes": "Down my reporting line: Jordan reports to Sam, who is away, so I hand it over.",
    }),
    ("agent-sarah", "agent-taylor", "Refresh the colour tokens", "CSS", {
        "primary_reason": "CSS expertise (Design), 2/5 tasks.",
        "fallback": "Keep it myself (CSS) after the settings page.",
        "reasoning": "Priority 3: the colours belong to the design system Taylor owns.",
        "notes": "Cross-team delegation, agreed with Taylor.",
    }),
]  # fmt: skip

QUEUED = (
    "agent-alex",
    "agent-database-lead",
    "Add a Redis cache to the product pages",
    "Redis",
    "Morgan is the only Redis expert and holds 5/5 tasks; it can wait (low urgency).",
)
ESCALATED = (
    "agent-jordan",
    "Raise the AWS account limits",
    "AWS",
    "Needs the AWS account owner: my lead Sam is away and there is no default supervisor.",
)


@dataclass
class Outcome:
    """What one run of the demo added, and what it had to leave out (and why)."""

    added: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _agent(org: Organization, handle: str) -> Agent:
    agent = org.agents.filter(handle=handle).first()
    if agent is None:
        raise NotFound(f"the demo agent {handle} no longer exists.", "agent_not_found")
    return agent


def _as(agent: Agent) -> Actor:
    return Actor(ActorKind.AGENT, agent.handle, agent=agent)


def _created(org, actor: Actor, title: str, expertise: str, **values) -> Task:
    """A demo task, made by the services as any other."""
    return services.task_create(
        org=org,
        actor=actor,
        title=title,
        description=DEMO_NOTE,
        required_expertise=expertise,
        **values,
    )


def _held(org, handle, title, expertise, urgency, moves) -> None:
    holder = _agent(org, handle)
    task = _created(org, DEMO_HUMAN, title, expertise, urgency=urgency, assignee=holder)
    for status in moves:
        note = BLOCKED_NOTE if status == BLOCKED else ""
        task = services.task_set_status(task=task, actor=_as(holder), status=status, note=note)


def _delegated(org, source, target, title, expertise, decision) -> None:
    by = _agent(org, source)
    task = _created(org, _as(by), title, expertise, urgency=Urgency.HIGH, assignee=by)
    services.task_delegate(task=task, actor=_as(by), to=_agent(org, target), **decision)


def _queued(org, source, expert, title, expertise, reasoning) -> None:
    by = _agent(org, source)
    task = _created(org, _as(by), title, expertise, urgency=Urgency.LOW)
    services.task_queue(task=task, actor=_as(by), to=_agent(org, expert), reasoning=reasoning)


def _escalated(org, source, title, expertise, reason) -> None:
    by = _agent(org, source)
    task = _created(org, _as(by), title, expertise, urgency=Urgency.HIGH)
    task = services.task_escalate(task=task, actor=_as(by), reason=reason)
    if task.status != TaskStatus.ESCALATED:
        # Someone was given a default supervisor or Sam is back: then it is not the demo's story.
        raise NotFound("the escalation found an agent, not humans.", "not_escalated")


def stories(org: Organization) -> list[tuple[str, Callable[[], None]]]:
    """(title, play) in the order that makes the workloads of DEMO_AGENTS."""
    plays = [(row[1], lambda row=row: _held(org, *row)) for row in HELD]
    plays += [(row[2], lambda row=row: _delegated(org, *row)) for row in DELEGATIONS]
    plays.append((QUEUED[2], lambda: _queued(org, *QUEUED)))
    plays.append((ESCALATED[1], lambda: _escalated(org, *ESCALATED)))
    return plays


def seed_demo_work(org: Organization) -> Outcome:
    """Play every demo story whose task does not exist yet; never touch an existing task."""
    outcome = Outcome()
    for title, play in stories(org):
        if Task.objects.filter(organization=org, title=title).exists():
            continue
        try:
            with transaction.atomic():
                play()
        except DomainError as exc:
            outcome.skipped.append((title, exc.message))
        else:
            outcome.added.append(title)
    return outcome


def seed_demo(*, slug: str = "demo") -> Organization:
    """The demo organization and its tasks (no collaboration: that one needs a runner)."""
    org = seed_demo_organization(slug=slug)
    seed_demo_work(org)
    return org
