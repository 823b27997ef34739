"""organization/prepared.py: queries compiled once, answered as rows or as model instances."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from organization.models import Agent
from organization.prepared import INT, TEXT, PreparedInstances, PreparedQuery
from tests.factories import make_agent, make_org

pytestmark = pytest.mark.django_db


def test_a_prepared_query_answers_for_each_value_it_is_given():
    org = make_org()
    make_agent(org, "agent-a", role="Engineer")
    make_agent(org, "agent-b", role="Lead")
    roles = PreparedQuery(
        Agent,
        lambda org_id, handle: (
            Agent.objects.filter(organization_id=org_id, handle=handle)
            .order_by()
            .values_list("role")
        ),
        org_id=INT,
        handle=TEXT,
    )
    assert roles.rows(org_id=org.pk, handle="agent-a") == [("Engineer",)]
    assert roles.rows(org_id=org.pk, handle="agent-b") == [("Lead",)]
    assert roles.rows(org_id=org.pk + 1, handle="agent-a") == []


def test_instances_read_the_named_fields_in_the_models_order_and_defer_the_rest():
    """`Model.from_db` takes the columns in the model's field order: naming them in another
    order must not put one field's value in another."""
    org = make_org()
    agent = make_agent(org, "agent-a", role="Engineer", is_paused=True, workload_capacity=7)
    # Named out of the model's order on purpose.
    prepared = PreparedInstances(
        Agent,
        ("is_paused", "handle", "id", "organization_id"),
        lambda agent_id: Agent.objects.filter(pk=agent_id).order_by(),
        agent_id=INT,
    )
    with CaptureQueriesContext(connection) as read:
        (found,) = prepared.instances(agent_id=agent.pk)
    assert len(read) == 1
    assert (found.pk, found.organization_id, found.handle, found.is_paused) == (
        agent.pk,
        org.pk,
        "agent-a",
        True,
    )
    assert found.get_deferred_fields() >= {"role", "workload_capacity"}
    with CaptureQueriesContext(connection) as deferred:
        assert found.workload_capacity == 7  # read on first use
    assert len(deferred) == 1
    assert prepared.instances(agent_id=agent.pk + 1000) == []
