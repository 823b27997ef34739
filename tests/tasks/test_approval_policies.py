"""Approval policies: `GET/POST /api/approval-policies`, `GET/PATCH/DELETE …/<id>` (issue 37 §1)."""

import pytest

from organization.models import Organization
from tasks.models import ApprovalPolicy
from tests.factories import make_admin_user, make_key, make_org
from tests.tasks.conftest import assert_error, post

pytestmark = pytest.mark.django_db

URL = "/api/approval-policies"


def cross_team(**extra):
    return {"name": "Cross-team waits", "trigger": "cross_team_delegation", **extra}


def flag(org) -> bool:
    return Organization.objects.get(pk=org.pk).has_approval_policies


def test_an_organization_key_creates_a_policy_with_its_defaults(cast):
    response = post(cast.human, URL, cross_team())
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["trigger"] == "cross_team_delegation"
    assert body["scope"] == "organization"
    assert (body["team"], body["agent"], body["deciders"]) == (None, None, [])
    assert body["on_expiry"] == "reject"
    assert body["enabled"] is True
    assert body["expires_after_seconds"] >= 1
    assert body["decisions"] == {}
    assert flag(cast.org)


def test_it_lists_reads_patches_and_deletes_a_policy(cast):
    made = post(cast.human, URL, cross_team()).json()
    listed = cast.human.get(URL).json()
    assert [p["id"] for p in listed] == [made["id"]]
    assert cast.human.get(f"{URL}/{made['id']}").json()["name"] == "Cross-team waits"

    patched = cast.human.patch(
        f"{URL}/{made['id']}", {"enabled": False, "warn_before_seconds": 10}, format="json"
    )
    assert patched.status_code == 200, patched.content
    assert patched.json()["enabled"] is False
    assert not flag(cast.org)

    deleted = cast.human.delete(f"{URL}/{made['id']}")
    assert deleted.status_code == 204
    assert not ApprovalPolicy.objects.exists()
    assert_error(cast.human.get(f"{URL}/{made['id']}"), 404, "policy_not_found")


def test_scopes_name_a_team_or_an_agent_of_the_organization(cast):
    team = post(cast.human, URL, cross_team(scope="team", team="Development")).json()
    assert team["team"] == "Development"
    agent = post(cast.human, URL, cross_team(scope="agent", agent="agent-sarah")).json()
    assert agent["agent"] == "agent-sarah"
    assert_error(
        post(cast.human, URL, cross_team(scope="team", team="Nope")), 404, "team_not_found"
    )
    assert_error(post(cast.human, URL, cross_team(scope="agent")), 404, "agent_not_found")


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": "x", "trigger": "urgency"}, "urgencies"),
        ({"name": "x", "trigger": "urgency", "urgencies": ["urgent"]}, "not a valid choice"),
        ({"name": "x", "trigger": "tool"}, "tools"),
        ({"name": "x", "trigger": "tool", "tools": ["no_such_tool"]}, "tools"),
        ({"name": "x", "trigger": "collaboration_cost"}, "cost_above_usd"),
        ({"name": "x", "trigger": "nope"}, "trigger"),
        (cross_team(expires_after_seconds=0), "expires_after_seconds"),
        (cross_team(expires_after_seconds=10, warn_before_seconds=10), "warn_before_seconds"),
        (cross_team(on_expiry="maybe"), "on_expiry"),
        (cross_team(deciders=["nobody-here"]), "deciders"),
    ],
)
def test_an_invalid_policy_is_400_naming_the_field(cast, body, field):
    response = post(cast.human, URL, body)
    assert_error(response, 400, "invalid", field)


def test_deciders_are_members_of_the_organization(cast):
    make_admin_user(cast.org, username="dana")
    body = post(cast.human, URL, cross_team(deciders=["dana"])).json()
    assert body["deciders"] == ["dana"]


def test_an_agent_key_may_not_read_or_write_policies(cast):
    sarah = cast.client(cast.sarah)
    assert_error(sarah.get(URL), 403, "human_required")
    assert_error(post(sarah, URL, cross_team()), 403, "human_required")


def test_another_organizations_policy_is_404(cast):
    made = post(cast.human, URL, cross_team()).json()
    other = make_org("other")
    from tests.conftest import KeyClient

    theirs = KeyClient(make_key(other))
    assert_error(theirs.get(f"{URL}/{made['id']}"), 404, "policy_not_found")
    assert_error(theirs.delete(f"{URL}/{made['id']}"), 404, "policy_not_found")
    assert theirs.get(URL).json() == []
