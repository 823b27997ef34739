"""Whom a task's delegation chain names: the quoted handle in the chain's JSON text, case aside
(an agent's view of the tasks, a former agent's handle), read through the chain's index."""

import pytest
from django.db.models import Q

from organization.models import named_in_delegation_chain
from tasks.models import Task
from tests.factories import make_org

pytestmark = pytest.mark.django_db

CHAINS = {
    "first": ["agent-sam", "agent-lead"],
    "last": ["agent-lead", "agent-sam"],
    "upper": ["AGENT-SAM"],
    "longer": ["agent-samuel", "agent-lead"],
    "inside": ["the-agent-sam"],
    "empty": [],
}


def test_the_chain_names_a_handle_as_its_text_match_does():
    org = make_org("chains")
    tasks = {
        name: Task.objects.create(organization=org, title=name, delegation_chain=chain)
        for name, chain in CHAINS.items()
    }
    found = set(Task.objects.filter(named_in_delegation_chain("agent-sam")).values_list("title"))
    text = Q(delegation_chain__icontains='"agent-sam"')
    assert found == set(Task.objects.filter(text).values_list("title"))
    assert {title for (title,) in found} == {"first", "last", "upper"}
    assert Task.objects.filter(named_in_delegation_chain("agent-samuel")).get() == tasks["longer"]
