"""`seed_demo` and `create_api_key`: used by tests, docs and outside checks alike."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from organization.models import Agent, ApiKey, Organization, TeamRule
from tasks.models import HELD_STATUSES, Task
from tests.conftest import KeyClient
from tests.factories import make_agent, make_org

pytestmark = pytest.mark.django_db

# id: (team, senior, workload, paused, hierarchy role)
DEMO = {
    "agent-alice": ("Leadership", None, 4, False, "supervisor"),
    "agent-sam": ("Infrastructure", "agent-alice", 0, True, "supervisor"),
    "agent-sarah": ("Development", "agent-alice", 3, False, "worker"),
    "agent-alex": ("Development", "agent-alice", 1, False, "worker"),
    "agent-jordan": ("Infrastructure", "agent-sam", 5, False, "worker"),
    "agent-database-lead": ("Infrastructure", "agent-sam", 5, False, "specialist"),
    "agent-taylor": ("Design", "agent-alice", 3, False, "worker"),
}


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def demo_state(slug: str) -> dict:
    org = Organization.objects.get(slug=slug)
    client = KeyClient(run("create_api_key", "--org", slug).strip())
    agents = {a["id"]: a for a in client.get("/api/agents", {"limit": 100}).json()["results"]}
    return {
        handle: (
            a["team"],
            a["seniorId"],
            a["current_workload"],
            a["paused"],
            a["hierarchy_role"]["role"],
        )
        for handle, a in agents.items()
    } | {"_agents": Agent.objects.filter(organization=org).count()}


def test_seed_demo_is_idempotent(db):
    run("seed_demo")
    tasks = Task.objects.count()
    run("seed_demo")
    assert Task.objects.count() == tasks
    assert demo_state("demo") == DEMO | {"_agents": 7}
    rule = TeamRule.objects.get(organization__slug="demo")
    assert (rule.allow_peer_assignment, rule.require_supervisor_for_tasks) == (False, False)
    assert rule.default_supervisor is None
    assert rule.stale_after_critical == timedelta(minutes=15)


# The issue's table, written out here (not imported from organization/demo.py) so that a change
# of the seed data cannot pass unnoticed: id: (name, job title, expertise).
DEMO_PEOPLE = {
    "agent-alice": ("Alice", "Engineering Manager", ["Leadership", "Planning"]),
    "agent-sam": ("Sam", "Infrastructure Lead", ["AWS", "Terraform"]),
    "agent-sarah": ("Sarah", "Frontend Developer", ["React", "TypeScript", "CSS"]),
    "agent-alex": ("Alex", "Backend Developer", ["Node.js", "PostgreSQL", "API Design"]),
    "agent-jordan": ("Jordan", "DevOps Engineer", ["Docker", "Kubernetes", "AWS"]),
    "agent-database-lead": ("Morgan", "Database Lead", ["PostgreSQL", "MySQL", "Redis"]),
    "agent-taylor": ("Taylor", "Designer", ["Figma", "CSS"]),
}


def test_seed_demo_creates_exactly_the_issues_agents_with_real_held_tasks(db):
    run("seed_demo")
    agents = Agent.objects.filter(organization__slug="demo")
    assert {a.handle: (a.name, a.role, a.expertise) for a in agents} == DEMO_PEOPLE
    for handle, (_, _, held, _, _) in DEMO.items():
        tasks = Task.objects.filter(assignee__handle=handle, status__in=HELD_STATUSES)
        assert tasks.count() == held, handle
        assert all(t.organization.slug == "demo" for t in tasks)
    rule = TeamRule.objects.get(organization__slug="demo")
    assert rule.max_delegation_depth == 5
    assert (rule.stale_after_high, rule.stale_after_normal, rule.stale_after_low) == (
        timedelta(hours=1),
        timedelta(hours=4),
        timedelta(hours=24),
    )


def test_seed_demo_leaves_a_changed_demo_as_the_user_left_it(db):
    run("seed_demo")
    Agent.objects.filter(handle="agent-sam").update(is_paused=False, expertise=["AWS, GCP"])
    run("seed_demo")
    sam = Agent.objects.get(handle="agent-sam")
    assert (sam.is_paused, sam.expertise) == (False, ["AWS, GCP"])


def test_seed_demo_takes_the_organization_slug(db):
    out = run("seed_demo", "--org", "acme")
    assert "acme" in out
    assert demo_state("acme") == DEMO | {"_agents": 7}
    assert not Organization.objects.filter(slug="demo").exists()


@pytest.mark.parametrize("slug", ["", "Not a slug!", "../../tmp/elsewhere", "x" * 101])
def test_seed_demo_refuses_an_org_that_is_not_a_slug(db, slug):
    """get_or_create skips the field's validation: an empty slug, spaces or `../..` (which
    AGENT_ORG_MANIFEST_DIR/<slug> would follow out of its directory) are refused, not stored."""
    with pytest.raises(CommandError, match="--org"):
        run("seed_demo", "--org", slug)
    assert not Organization.objects.filter(slug=slug).exists()


def test_create_api_key_prints_only_a_working_agent_key(demo):
    out = run("create_api_key", "--org", "demo", "--agent", "agent-sarah", "--name", "ci")
    key = out.strip()
    assert out == key or out == key + "\n"
    assert key.count("_") >= 2 and " " not in key
    stored = ApiKey.objects.get(prefix=key.split("_")[1])
    assert (stored.name, stored.agent.handle) == ("ci", "agent-sarah")
    roster = KeyClient(key).get("/api/roster").json()
    assert roster["agent_context"]["id"] == "agent-sarah"


def test_create_api_key_without_agent_prints_an_organization_key(demo):
    key = run("create_api_key", "--org", "demo").strip()
    response = KeyClient(key).get("/api/roster")
    assert response.status_code == 200
    assert response.json()["agent_context"] is None


def test_create_api_key_refuses_unknown_organization_or_agent(demo):
    with pytest.raises(CommandError, match="Organization not found"):
        run("create_api_key", "--org", "nope")
    with pytest.raises(CommandError, match="Agent not found"):
        run("create_api_key", "--org", "demo", "--agent", "agent-nobody")


def test_create_api_key_with_an_empty_agent_is_refused_not_an_organization_key(db):
    """`--agent "$AGENT"` with the variable unset asks for an agent key: an organization key
    (an administrator of the whole organization) in its place would be a silent promotion."""
    org = make_org("acme")
    make_agent(org, "agent-sarah")
    for empty in ["", "  "]:
        with pytest.raises(CommandError, match="--agent is empty"):
            run("create_api_key", "--org", "acme", "--agent", empty)
    assert not ApiKey.objects.filter(organization=org).exists()


def test_create_api_key_refuses_a_name_longer_than_its_column(db):
    """A message naming the limit (100), not the database's DataError traceback."""
    make_org("acme")
    with pytest.raises(CommandError, match="at most 100"):
        run("create_api_key", "--org", "acme", "--name", "n" * 101)
    assert run("create_api_key", "--org", "acme", "--name", "n" * 100).strip()


def test_ensure_admin_creates_the_admin_once_and_reset_gives_a_new_password(demo, client):
    from django.contrib.auth import get_user_model

    first = run("ensure_admin")
    password = first.split("password: ")[1].split()[0]
    assert "exists" in run("ensure_admin")
    assert get_user_model().objects.get(username="admin").check_password(password)

    reset = run("ensure_admin", "--reset")
    new = reset.split("new password: ")[1].split()[0]
    admin = get_user_model().objects.get(username="admin")
    assert new != password
    assert admin.check_password(new) and not admin.check_password(password)
    assert client.login(username="admin", password=new)
    assert client.get("/admin/").status_code == 200


def test_ensure_admin_refuses_an_organization_that_does_not_exist(demo):
    """A mistyped --org made the superuser with no membership and said nothing."""
    from django.contrib.auth import get_user_model

    with pytest.raises(CommandError, match="No organization with slug 'dmeo'"):
        run("ensure_admin", "--org", "dmeo")
    # Blank (`--org "$ORG"` with ORG unset) is a slug given, not the default.
    with pytest.raises(CommandError, match="No organization with slug ''"):
        run("ensure_admin", "--org", "")
    assert not get_user_model().objects.filter(username="admin").exists()
    run("ensure_admin", "--org", "demo")
    admin = get_user_model().objects.get(username="admin")
    assert admin.memberships.get().organization.slug == "demo"
