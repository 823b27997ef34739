"""Fixtures of the runtime tests: a small organization of managed agents, and running their
queued runs here, in this process, by the same runner a worker uses."""

import pytest

from organization.caller import Caller, caller_for_agent
from organization.models import AgentRuntime, TeamRule
from runtime.models import Run, RunStatus
from runtime.runner import run_agent
from tasks.rules import SYSTEM, Actor
from tests.collaboration.conftest import fake_llm, fresh_pool, offline, wait_for  # noqa: F401  (fixtures)
from tests.factories import make_admin_user, make_agent, make_org, make_team

MANAGED = AgentRuntime.MANAGED


class Cast:
    """Lena leads Alex (PostgreSQL) and Sarah (React), all three managed; Morgan (Redis) is
    external; Sam is managed but paused. Bob is an agent of another organization."""

    def __init__(self):
        self.org = make_org("acme")
        TeamRule.objects.create(organization=self.org)
        lead, dev, ops = (make_team(self.org, n) for n in ("Leadership", "Development", "Ops"))
        self.lena = make_agent(self.org, "agent-lena", name="Lena", role="Engineering Manager",
                               team=lead, expertise=["Leadership"], runtime=MANAGED)  # fmt: skip
        self.alex = make_agent(self.org, "agent-alex", name="Alex", role="Backend Developer",
                               team=dev, senior=self.lena, expertise=["PostgreSQL"],
                               runtime=MANAGED)  # fmt: skip
        self.sarah = make_agent(self.org, "agent-sarah", name="Sarah", role="Frontend Developer",
                                team=dev, senior=self.lena, expertise=["React"],
                                runtime=MANAGED)  # fmt: skip
        self.morgan = make_agent(self.org, "agent-morgan", name="Morgan", role="Database Lead",
                                 team=ops, senior=self.lena, expertise=["Redis"])  # fmt: skip
        self.sam = make_agent(self.org, "agent-sam", name="Sam", role="Infrastructure Lead",
                              team=ops, senior=self.lena, expertise=["AWS"], runtime=MANAGED,
                              is_paused=True)  # fmt: skip
        self.other = make_org("other")
        self.bob = make_agent(self.other, "agent-bob", name="Bob", runtime=MANAGED)
        self.human = Caller(organization=self.org, user=make_admin_user(self.org))

    @property
    def by_human(self) -> Actor:
        return Actor.of(self.human)

    def actor(self, agent) -> Actor:
        return Actor.of(caller_for_agent(agent))


@pytest.fixture
def cast(db):
    return Cast()


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
