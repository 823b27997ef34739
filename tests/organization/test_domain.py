"""Issue 2 §2: the domain's validation, with clear messages, at the model (what every form,
admin page and service that calls full_clean() relies on)."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from organization.models import Agent, ApiKey, ExpertiseGroup, Organization, TeamRule
from tests.factories import make_agent, make_org, make_team

pytestmark = pytest.mark.django_db


def errors_of(obj) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as exc:
        obj.full_clean()
    return exc.value.message_dict


@pytest.fixture
def org(db):
    return make_org("acme")


@pytest.fixture
def rival(db):
    return make_org("rival")


@pytest.mark.parametrize("handle", ["agent-sarah", "a", "0x", "agent-2-b"])
def test_a_valid_handle_passes(org, handle):
    Agent(organization=org, handle=handle, name="X").full_clean()


@pytest.mark.parametrize(
    "handle", ["Agent-Sarah", "-agent", "agent_sarah", "agent sarah", "agent.s", ""]
)
def test_a_handle_outside_the_pattern_is_refused(org, handle):
    errors = errors_of(Agent(organization=org, handle=handle, name="X"))
    assert list(errors) == ["handle"]
    if handle:
        assert errors["handle"] == [
            "Use lowercase letters, digits and hyphens, starting with a letter or digit "
            "(e.g. agent-sarah)."
        ]


def test_a_handle_is_unique_per_organization_not_globally(org, rival):
    make_agent(org, "agent-sarah")
    make_agent(rival, "agent-sarah")  # another organization may use it
    errors = errors_of(Agent(organization=org, handle="agent-sarah", name="Twin"))
    assert list(errors) == ["__all__"]
    with pytest.raises(IntegrityError), transaction.atomic():
        Agent.objects.create(organization=org, handle="agent-sarah", name="Twin")


@pytest.mark.parametrize(
    "expertise", ["React", ["React", ""], ["React", "   "], ["React", 3], {"React": 1}, [None]]
)
def test_expertise_must_be_a_list_of_non_empty_strings(org, expertise):
    errors = errors_of(Agent(organization=org, handle="agent-x", name="X", expertise=expertise))
    assert errors == {"expertise": ["Expertise must be a list of non-empty strings."]}
    group = ExpertiseGroup(organization=org, name="G", expertise=expertise)
    assert errors_of(group) == {"expertise": ["Expertise must be a list of non-empty strings."]}


@pytest.mark.parametrize("expertise", [[], ["React"], ["Node.js", "API Design"]])
def test_a_list_of_terms_is_valid_expertise(org, expertise):
    Agent(organization=org, handle="agent-x", name="X", expertise=expertise).full_clean()


def test_the_team_must_be_of_the_agents_organization(org, rival):
    agent = Agent(organization=org, handle="agent-x", name="X", team=make_team(rival))
    assert errors_of(agent) == {"team": ["The team must belong to the agent's organization."]}
    agent.team = make_team(org)
    agent.full_clean()


def test_the_senior_must_be_of_the_agents_organization(org, rival):
    agent = Agent(organization=org, handle="agent-x", name="X", senior=make_agent(rival))
    assert errors_of(agent) == {"senior": ["The senior must belong to the agent's organization."]}
    agent.senior = make_agent(org)
    agent.full_clean()


def test_the_senior_chain_has_no_cycle(org):
    boss = make_agent(org, "agent-boss")
    mid = make_agent(org, "agent-mid", senior=boss)
    low = make_agent(org, "agent-low", senior=mid)
    cycle = ["This senior would create a cycle in the reporting line."]
    boss.senior = low  # boss -> low -> mid -> boss
    assert errors_of(boss) == {"senior": cycle}
    boss.senior = boss  # their own senior
    assert errors_of(boss) == {"senior": cycle}
    boss.senior = None
    boss.full_clean()


def test_the_default_supervisor_must_hold_the_supervisor_role(org, rival):
    rule = TeamRule.objects.create(organization=org)
    rule.default_supervisor = make_agent(org, "agent-w", hierarchy_role="worker")
    assert errors_of(rule) == {
        "default_supervisor": ["Agent must have supervisor role to be default supervisor"]
    }
    rule.default_supervisor = make_agent(org, "agent-none")  # no role at all
    assert errors_of(rule) == {
        "default_supervisor": ["Agent must have supervisor role to be default supervisor"]
    }
    rule.default_supervisor = make_agent(rival, "agent-s", hierarchy_role="supervisor")
    assert errors_of(rule) == {"default_supervisor": ["Supervisor agent not found in workspace"]}
    rule.default_supervisor = make_agent(org, "agent-s", hierarchy_role="supervisor")
    rule.full_clean()


def test_a_key_agent_must_be_of_the_keys_organization(org, rival):
    key = ApiKey(organization=org, agent=make_agent(rival), prefix="p", digest="d")
    assert errors_of(key) == {"agent": ["The agent must belong to the key's organization."]}


@pytest.mark.parametrize("slug", ["_conformance", "_ops"])
def test_a_slug_starting_with_an_underscore_is_reserved_for_the_service(slug):
    assert errors_of(Organization(name="Kit", slug=slug)) == {
        "slug": ["A slug starting with “_” is reserved for the service."]
    }
    Organization(name="Kit", slug=slug.lstrip("_")).full_clean()
