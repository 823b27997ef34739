"""Fixtures of the runtime tests: a small organization of managed agents, and running their
queued runs here, in this process, by the same runner a worker uses."""

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from config.celery import app
from organization.caller import Caller, caller_for_agent
from organization.models import AgentRuntime, TeamRule
from runtime.models import Run, RunStatus
from runtime.runner import run_agent
from tasks import services
from tasks.models import Task
from tasks.rules import SYSTEM, Actor
from tests.collaboration.conftest import fake_llm, fresh_pool, offline, wait_for  # noqa: F401  (fixtures)
from tests.factories import make_admin_user, make_agent, make_org, make_team

MANAGED, EXTERNAL = AgentRuntime.MANAGED, AgentRuntime.EXTERNAL


class Cast:
    """Lena leads Alex (PostgreSQL) and Sarah (React), all three managed; Morgan (Redis) is
    external; Sam is managed but paused. Bob is an agent of another organization."""

    def __init__(self):
        self.org = make_org("acme")
        TeamRule.objects.create(organization=self.org)
        lead, dev, ops = (make_team(self.org, n) for n in ("Leadership", "Development", "Ops"))
        lena = self.lena = make_agent(
            self.org,
            "agent-lena",
            role="Engineering Manager",
            team=lead,
            expertise=["Leadership"],
            runtime=MANAGED,
        )

        def report(handle: str, role: str, team, expertise: str, **fields):
            """One of Lena's reports, managed unless said (make_agent names it after its handle)."""
            fields = {"runtime": MANAGED, **fields}
            return make_agent(
                self.org, handle, role=role, team=team, senior=lena, expertise=[expertise], **fields
            )

        self.alex = report("agent-alex", "Backend Developer", dev, "PostgreSQL")
        self.sarah = report("agent-sarah", "Frontend Developer", dev, "React")
        self.morgan = report("agent-morgan", "Database Lead", ops, "Redis", runtime=EXTERNAL)
        self.sam = report("agent-sam", "Infrastructure Lead", ops, "AWS", is_paused=True)
        self.other = make_org("other")
        self.bob = make_agent(self.other, "agent-bob", name="Bob", runtime=MANAGED)
        self.human = Caller(organization=self.org, user=make_admin_user(self.org))

    @property
    def by_human(self) -> Actor:
        return Actor.of(self.human)

    def actor(self, agent) -> Actor:
        return Actor.of(caller_for_agent(agent))

    def assign(self, agent, title: str = "t", by: Actor | None = None, **fields) -> Task:
        """A new task for `agent`, created by a human unless `by` says who."""
        who = self.by_human if by is None else by
        return services.task_create(org=self.org, actor=who, title=title, assignee=agent, **fields)


@pytest.fixture
def cast(db):
    return Cast()


def flush_redis():
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()


@pytest.fixture
def worker():
    """An in-process Celery worker on the Redis broker of REDIS_URL, emptied first."""
    flush_redis()
    with start_worker(
        app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"
    ):
        yield


def drain(limit: int = 30) -> list[int]:
    """Run every queued run (of agents not paused) here, oldest first, until none is left;
    the ids in the order they ran."""
    ran = []
    for _ in range(limit):
        run = (
            Run.objects.filter(status=RunStatus.QUEUED, agent__is_paused=False)
            .order_by("pk")
            .first()
        )
        if run is None:
            return ran
        run_agent(run.pk)
        ran.append(run.pk)
    raise AssertionError(f"runs still queued after {limit}: {ran}")


__all__ = ["SYSTEM", "Cast", "drain"]


def runs_of(agent) -> list[tuple[str, str, int | None]]:
    """The agent's runs as (status, trigger, task), oldest first."""
    return [
        (r.status, r.trigger, r.task_id) for r in Run.objects.filter(agent=agent).order_by("pk")
    ]


def triggers_of(run) -> list[tuple[str, int | None]]:
    return list(run.triggers.order_by("pk").values_list("trigger", "task_id"))
