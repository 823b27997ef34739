"""A small cast for tests: make_org, make_agent, make_key … (no factory library needed)."""

import itertools

from django.contrib.auth import get_user_model

from organization.models import Agent, AgentRole, Membership, Organization, Team
from organization.services import api_key_create
from tasks.models import Task, TaskStatus

_seq = itertools.count(1)


def make_org(slug: str | None = None, name: str | None = None) -> Organization:
    slug = slug or f"org-{next(_seq)}"
    return Organization.objects.create(slug=slug, name=name or slug.title())


def make_team(org: Organization, name: str | None = None) -> Team:
    return Team.objects.create(organization=org, name=name or f"Team {next(_seq)}")


def make_agent(org: Organization, handle: str | None = None, **fields) -> Agent:
    handle = handle or f"agent-{next(_seq)}"
    fields.setdefault("name", handle.removeprefix("agent-").title())
    hierarchy_role = fields.pop("hierarchy_role", None)
    agent = Agent.objects.create(organization=org, handle=handle, **fields)
    if hierarchy_role:
        AgentRole.objects.create(agent=agent, role=hierarchy_role)
    return agent


def give_tasks(agent: Agent, count: int, status: str = TaskStatus.ASSIGNED) -> list[Task]:
    return [
        Task.objects.create(
            organization=agent.organization,
            title=f"task {next(_seq)}",
            status=status,
            assignee=agent,
            delegation_chain=[agent.handle],
        )
        for _ in range(count)
    ]


def make_key(org: Organization, agent: Agent | None = None) -> str:
    return api_key_create(organization=org, agent=agent, name="test")[1]


def make_admin_user(org: Organization | None = None, username: str | None = None, **extra):
    user = get_user_model().objects.create_user(
        username=username or f"user{next(_seq)}",
        password="pw-for-tests-only",
        is_staff=True,
        **extra,
    )
    if org is not None:
        Membership.objects.create(user=user, organization=org, is_admin=True)
    return user
