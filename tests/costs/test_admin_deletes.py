"""Deleting in the admin (docs/admin.md): an agent (its page or the bulk action), a team (its
page or the organization page's inline), an organization (superusers). A row that goes with it
by CASCADE — the agent's API keys, a team's or an agent's budget — is audited on its way out
(organization/history.py `_fill` stores `str(instance)` as the history row's label), and its
`__str__` reads the agent or team that the same deletion already removed (Django orders the
deletion of a *nullable* CASCADE foreign key arbitrarily): `DoesNotExist`, a 500, nothing
deleted."""

import pytest

from costs.budgets import budget_set
from costs.models import Budget
from organization.caller import caller_for_member
from organization.models import Agent, ApiKey, Team
from tests.factories import make_admin_user

from .conftest import admin_delete

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root(admin_client):
    admin_client.raise_request_exception = False  # a 500 is an answer here
    return admin_client


@pytest.mark.parametrize("how", ["page", "action"])
def test_an_agent_with_an_api_key_can_be_deleted_in_the_admin(root, cast, how):
    """docs/admin.md: "Deleting an agent (its page or the bulk action) first escalates every
    task it holds …". Alex holds no task, but has an agent key (as every agent that calls the
    API does). The delete cascades to the key; `ApiKey.__str__` (organization/models/keys.py) reads
    `self.agent.handle` of the agent already deleted in the same collector run → 500."""
    assert ApiKey.objects.filter(agent=cast.alex).exists()
    response = admin_delete(root, "/admin/organization/agent/", cast.alex.pk, how)
    assert response.status_code == 302, response.status_code
    assert not Agent.objects.filter(pk=cast.alex.pk).exists()


def test_a_team_with_a_budget_can_be_deleted_in_the_admin(root, cast):
    """docs/costs.md: a team budget is set in the admin or the API; docs/admin.md lets a human
    delete a team. The delete cascades to the team's budget, whose history label is
    `str(budget)` → `Budget.subject` (costs/models.py) → `self.team.name` of the team already
    deleted → 500, and the team cannot be deleted at all while it has a budget."""
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="team", team="Development", limit_usd="5")
    response = admin_delete(root, "/admin/organization/team/", cast.dev.pk)
    assert response.status_code == 302, response.status_code
    assert not Team.objects.filter(pk=cast.dev.pk).exists()
    assert not Budget.objects.filter(scope="team").exists()


def test_an_organization_with_keys_and_budgets_can_be_deleted_in_the_admin(root, cast):
    """docs/admin.md: a superuser deletes an organization. It cascades to its teams, agents,
    agent keys and the team's and agent's budgets, each audited on its way out: a label that
    reads a team or agent the same delete removed first must not make it a 500."""
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="organization", limit_usd="9")
    budget_set(caller=caller, scope="team", team="Development", limit_usd="5")
    budget_set(caller=caller, scope="agent", agent="agent-alex", limit_usd="1")
    response = admin_delete(root, "/admin/organization/organization/", cast.org.pk)
    assert response.status_code == 302, response.status_code
    assert not Team.objects.filter(organization=cast.org).exists()
    assert not Agent.objects.filter(organization=cast.org).exists()
    assert not ApiKey.objects.filter(organization=cast.org).exists()
    assert not Budget.objects.filter(organization=cast.org).exists()
    assert Agent.objects.filter(pk=cast.bob.pk).exists()  # another organization's: untouched


def test_an_agent_with_a_budget_can_be_deleted_in_the_admin(root, cast):
    """The same for an agent's own budget (its label reads the agent's handle)."""
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="agent", agent="agent-alex", limit_usd="1")
    response = admin_delete(root, "/admin/organization/agent/", cast.alex.pk)
    assert response.status_code == 302, response.status_code
    assert not Budget.objects.filter(scope="agent").exists()
