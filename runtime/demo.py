"""The demo organization's managed agents at work, offline and in-process.

Alice splits a launch for her reports, whose runs complete it; played once per story task."""

import logging

from django.db import connection, transaction

from collaboration.providers import Provider
from infrastructure.errors import DomainError
from organization.caller import caller_for_agent
from organization.history import record_changes
from organization.models import AgentRuntime, Organization
from tasks import services as task_services
from tasks.demo import DEMO_HUMAN, stories
from tasks.models import Task, TaskStatus
from tasks.rules import Actor

from .models import Run, RunStatus
from .runner import run_agent

log = logging.getLogger(__name__)

DEMO_MANAGED = ("agent-alice", "agent-sarah", "agent-alex", "agent-taylor")
STORY_TITLE = "Launch the customer portal"
STORY_DESCRIPTION = """\
Demo task for Alice's managed run (offline provider). Its parts:
- Build the portal's pages (React)
- Design the portal's screens (Figma)
- Add the portal's tables (PostgreSQL)"""
# Runs the story may take in all (it takes five); a guard, not a limit it meets.
MAX_RUNS = 20


def seed_demo_runtime(org: Organization) -> Task | None:
    """Make the demo's managed agents and play the story unless its task exists; None if not
    played (or it could not be: an agent is missing, paused or full)."""
    if connection.in_atomic_block:
        # Each step wakes the next agent once it commits: inside a caller's transaction nothing
        # would (a test's, or `seed_demo` wrapped in one), and the story would stop half-way.
        log.warning("the demo's managed story needs its steps committed: not played")
        return None
    if Task.objects.filter(organization=org, title=STORY_TITLE).exists():
        return None
    alice = org.agents.filter(handle="agent-alice").first()
    if alice is None:
        return None
    _start_their_demo_work(org)
    managed = org.agents.filter(handle__in=DEMO_MANAGED)
    managed.filter(llm_provider="").update(llm_provider=Provider.OFFLINE)
    managed.update(runtime=AgentRuntime.MANAGED)
    # In their history too: the runtime sweep reads there since when an agent is managed.
    record_changes(org.agents.filter(handle__in=DEMO_MANAGED).order_by("pk"))
    alice.refresh_from_db()
    try:
        with transaction.atomic():
            story = task_services.task_create(
                org=org,
                actor=DEMO_HUMAN,
                title=STORY_TITLE,
                description=STORY_DESCRIPTION,
                assignee=alice,
            )
    except DomainError as exc:
        log.warning("the demo's managed story was not played: %s", exc.message)
        return None
    # Outside the transaction: each run commits its own steps, as on a worker.
    for _ in range(MAX_RUNS):
        queued = Run.objects.filter(organization=org, status=RunStatus.QUEUED).order_by("pk")
        run = queued.first()
        if run is None:
            break
        try:
            run_agent(run.pk)
        except Exception:
            log.exception("the demo's run %s could not run here; a worker will", run.pk)
            break
    story.refresh_from_db()
    return story


def _start_their_demo_work(org: Organization) -> None:
    """The demo tasks the agents about to be managed hold unstarted are started by them (work
    from before they were managed): a managed agent holding work no run was woken for is woken
    by whatever makes room for it, and its run would finish tasks nobody asked it about."""
    titles = [title for title, _ in stories(org)]
    unstarted = Task.objects.filter(
        organization=org,
        title__in=titles,
        assignee__handle__in=DEMO_MANAGED,
        status=TaskStatus.ASSIGNED,
    ).select_related("assignee")
    for task in unstarted.order_by("pk"):
        holder = Actor.of(caller_for_agent(task.assignee))
        task_services.task_set_status(task=task, actor=holder, status=TaskStatus.IN_PROGRESS)
