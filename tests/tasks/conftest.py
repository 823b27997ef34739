"""The tasks cast: an organization `acme` with a supervisor (boss), two workers (sarah, alex)
on one team, a specialist (morgan) on another, and keys for each."""

import pytest

from organization.models import AgentRole, TeamRule
from tests.conftest import KeyClient
from tests.factories import make_agent, make_key, make_org, make_team


class Cast:
    def __init__(self):
        self.org = make_org("acme")
        self.rule = TeamRule.objects.create(organization=self.org)
        dev = make_team(self.org, "Development")
        data = make_team(self.org, "Data")
        self.boss = make_agent(self.org, "agent-boss", hierarchy_role="supervisor", team=dev)

        def under_boss(handle, role, team, skills):
            return make_agent(
                self.org, handle, hierarchy_role=role, team=team, senior=self.boss, expertise=skills
            )

        self.sarah = under_boss("agent-sarah", "worker", dev, ["React"])
        self.alex = under_boss("agent-alex", "worker", dev, ["PostgreSQL"])
        self.morgan = under_boss("agent-morgan", "specialist", data, ["PostgreSQL", "MySQL"])
        self.human = KeyClient(make_key(self.org))

    def client(self, agent):
        return KeyClient(make_key(self.org, agent))

    def enforce(self, *, allow_peer: bool = False, default_supervisor=None):
        self.rule.require_supervisor_for_tasks = True
        self.rule.allow_peer_assignment = allow_peer
        self.rule.default_supervisor = default_supervisor
        self.rule.save()

    def role(self, agent, **fields):
        AgentRole.objects.filter(agent=agent).update(**fields)


@pytest.fixture
def live(transactional_db):
    """(the cast, a live MCP server's URL): the server reads what the test commits."""
    from tests.organization.mcp.live import LiveServer

    cast = Cast()
    with LiveServer() as server:
        yield cast, server.url


@pytest.fixture
def cast(db):
    return Cast()


def post(client, path, body=None):
    return client.post(path, body or {}, format="json")


def create(client, **body):
    body.setdefault("title", "A task")
    return post(client, "/api/tasks", body)


def assert_error(response, status, code, message=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert body["success"] is False
    assert body["code"] == code, body
    if message is not None:
        assert message in body["error"], body["error"]
