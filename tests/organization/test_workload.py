"""organization/workload.py: the one definition of workload and status (Python and SQL agree)."""

import pytest
from django.db.models import IntegerField, Value

from organization import workload
from organization.models import Agent
from organization.selectors import agents_with_workload, workloads_of
from tasks.models import HELD_STATUSES, Task, TaskStatus
from tests.factories import give_tasks, make_agent, make_org

pytestmark = pytest.mark.django_db

CAPACITIES = range(0, 11)
WORKLOADS = range(0, 14)


def test_python_status_for_and_the_sql_expression_agree_on_a_grid():
    """Every (paused, workload, capacity), capacity 0 included: one query per workload."""
    org = make_org()
    for paused in (False, True):
        for capacity in CAPACITIES:
            make_agent(org, workload_capacity=capacity, is_paused=paused)
    agents = Agent.objects.filter(organization=org)
    checked = 0
    for load in WORKLOADS:
        rows = agents.annotate(
            current_workload=Value(load, output_field=IntegerField()),
            sql_status=workload.status_expression(),
        ).values_list("is_paused", "workload_capacity", "sql_status")
        for paused, capacity, sql_status in rows:
            expected = workload.status_for(is_paused=paused, workload=load, capacity=capacity)
            assert sql_status == expected, (paused, load, capacity)
            checked += 1
    assert checked == 2 * len(CAPACITIES) * len(WORKLOADS)


def test_the_tasks_app_counts_the_held_and_queued_statuses_organization_names():
    assert workload.held_statuses() == HELD_STATUSES
    assert workload.QUEUED_STATUS == TaskStatus.QUEUED


def test_every_way_of_counting_the_workload_gives_the_same_numbers():
    org = make_org()
    busy, idle, queuing = make_agent(org), make_agent(org), make_agent(org)
    give_tasks(busy, 2)
    give_tasks(busy, 1, TaskStatus.BLOCKED)
    give_tasks(busy, 1, TaskStatus.COMPLETED)  # not held
    give_tasks(idle, 1, TaskStatus.CANCELLED)  # not held
    Task.objects.create(organization=org, title="waits", queued_for=queuing)
    expected = {busy.pk: 3, idle.pk: 0, queuing.pk: 0}

    assert workloads_of(expected) == expected
    joined = agents_with_workload(org=org).values_list("pk", "current_workload")
    assert dict(joined) == expected
    correlated = Agent.objects.filter(organization=org).annotate(
        held=workload.workload_subquery(), queued=workload.queue_length()
    )
    assert {a.pk: a.held for a in correlated} == expected
    assert {a.pk: a.queued for a in correlated} == {busy.pk: 0, idle.pk: 0, queuing.pk: 1}
