"""infrastructure/prepared.py: queries compiled once, answered as rows or as model instances;
an UPDATE and an INSERT of every column compiled once; a filtered update compiled once."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from infrastructure.prepared import (
    INT,
    INT2,
    TEXT,
    PreparedInstances,
    PreparedQuery,
    PreparedQuerySet,
    insert_new,
    save_existing,
    update_where,
)
from organization.models import Agent
from organization.selectors import agents_with_workload
from organization.sql import holds_expertise
from tasks.models import Task, TaskStatus
from tests.factories import give_tasks, make_agent, make_org, make_team

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


def test_a_prepared_queryset_answers_instances_with_their_related_objects_in_one_query():
    """All the fields, JSON decoded as the ORM decodes it, and the objects `select_related`
    names; each argument by its own sentinel (two integers told apart by their values)."""
    org, other = make_org(), make_org()
    team = make_team(org, "Platform")
    agent = make_agent(org, "agent-a", team=team, expertise=["Python", "SQL"])
    make_agent(other, "agent-a")
    prepared = PreparedQuerySet(
        Agent,
        lambda org_id, agent_id: Agent.objects.select_related("team").filter(
            organization_id=org_id, pk=agent_id
        ),
        org_id=INT,
        agent_id=INT2,
    )
    with CaptureQueriesContext(connection) as read:
        (found,) = prepared.instances(org_id=org.pk, agent_id=agent.pk)
        assert found.team.name == "Platform"  # read with it, not on first use
    assert len(read) == 1
    assert (found.pk, found.handle, found.expertise) == (agent.pk, "agent-a", ["Python", "SQL"])
    assert found.get_deferred_fields() == set()
    assert prepared.instances(org_id=other.pk, agent_id=agent.pk) == []


def test_a_text_argument_inside_a_like_pattern_is_escaped_as_the_orm_escapes_it():
    """`name__contains=value` compiles to LIKE '%<value>%': a % or _ in the value is a literal,
    not a wildcard, exactly as when the ORM builds the query."""
    org = make_org()
    make_agent(org, "agent-off", name="50% off")
    make_agent(org, "agent-x", name="50X off")
    make_agent(org, "agent-under", name="a_b")
    make_agent(org, "agent-aqb", name="aqb")
    prepared = PreparedQuerySet(
        Agent,
        lambda org_id, text: Agent.objects.filter(organization_id=org_id, name__contains=text),
        org_id=INT,
        text=TEXT,
    )

    def names(text):
        found = sorted(a.name for a in prepared.instances(org_id=org.pk, text=text))
        orm = sorted(
            Agent.objects.filter(organization=org, name__contains=text).values_list(
                "name", flat=True
            )
        )
        assert found == orm
        return found

    assert names("50%") == ["50% off"]
    assert names("a_b") == ["a_b"]
    assert names("off") == ["50% off", "50X off"]


def test_save_existing_writes_every_column_as_save_would_in_one_statement():
    org = make_org()
    agent = make_agent(org, "agent-a")
    (task,) = give_tasks(agent, 1)
    before = task.updated_at
    task.title, task.status, task.result_data = "renamed", TaskStatus.COMPLETED, {"n": [1, 2]}
    task.assignee = None
    with CaptureQueriesContext(connection) as wrote:
        save_existing(task)
    assert len(wrote) == 1
    task.refresh_from_db()
    assert (task.title, task.status, task.result_data, task.assignee_id) == (
        "renamed",
        TaskStatus.COMPLETED,
        {"n": [1, 2]},
        None,
    )
    assert task.updated_at > before  # auto_now, as save() sets it


def test_save_existing_refuses_a_row_that_is_gone_and_leaves_new_rows_to_save():
    org = make_org()
    agent = make_agent(org, "agent-a")
    (task,) = give_tasks(agent, 1)
    Task.objects.filter(pk=task.pk).delete()
    with pytest.raises(Task.DoesNotExist):
        save_existing(task)
    assert not Task.objects.filter(pk=task.pk).exists()  # not inserted again
    new = Task(organization=org, title="new")
    save_existing(new)  # a new row: save() inserts it
    assert Task.objects.filter(pk=new.pk, title="new").exists()


def test_insert_new_writes_a_new_row_as_save_would_in_one_statement():
    org = make_org()
    task = Task(organization=org, title="new", result_data={"n": [1]})
    with CaptureQueriesContext(connection) as wrote:
        insert_new(task)
    assert len(wrote) == 1
    assert task.pk is not None and not task._state.adding
    stored = Task.objects.get(pk=task.pk)
    assert (stored.title, stored.result_data) == ("new", {"n": [1]})
    assert stored.created_at is not None  # auto_now_add, as save() sets it
    # A row with its primary key set is left to save(), which updates it.
    stored.title = "renamed"
    stored._state.adding = True
    insert_new(stored)
    assert Task.objects.get(pk=task.pk).title == "renamed"
    assert Task.objects.filter(organization=org).count() == 1


def test_a_prepared_queryset_sets_its_annotations_and_takes_a_list_as_one_parameter():
    """The recommendation's read: agents holding one of any number of terms (one text[]
    parameter on PostgreSQL), with their workload annotation, by one statement compiled once."""
    org = make_org()
    a = make_agent(org, "agent-a", expertise=["Python"])
    make_agent(org, "agent-b", expertise=["SQL", "Go"])
    make_agent(org, "agent-c", expertise=["Rust", "python"])
    give_tasks(a, 2)
    prepared = PreparedQuerySet(
        Agent,
        lambda org_id, terms: (
            agents_with_workload(org=org_id).filter(holds_expertise(terms)).order_by("handle")
        ),
        org_id=INT,
        terms=[TEXT],
    )

    def found(terms):
        return [
            (x.handle, x.current_workload) for x in prepared.instances(org_id=org.pk, terms=terms)
        ]

    assert found(["Python", "Go"]) == [("agent-a", 2), ("agent-b", 0)]
    assert found(["python"]) == [("agent-c", 0)]  # exact and case-sensitive: not "Python"
    assert found(["Py"]) == []


def test_update_where_updates_the_rows_the_orm_would_and_counts_them():
    org = make_org()
    agent = make_agent(org, "agent-a")
    held, done, other = give_tasks(agent, 3)
    Task.objects.filter(pk=done.pk).update(status=TaskStatus.COMPLETED)
    open_ = [TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS]

    changed = update_where(
        Task,
        {"assignee_id": agent.pk, "status__in": open_, "pk": held.pk},
        result="first",
        result_data={"n": 1},
    )
    again = update_where(
        Task, {"assignee_id": agent.pk, "status__in": open_, "pk": done.pk}, result="no"
    )

    assert (changed, again) == (1, 0)
    rows = dict(Task.objects.filter(assignee=agent).values_list("pk", "result"))
    assert rows == {held.pk: "first", done.pk: "", other.pk: ""}
    assert Task.objects.get(pk=held.pk).result_data == {"n": 1}


@pytest.mark.postgres
def test_update_where_writes_its_own_statement_and_leaves_an_expression_to_the_orm():
    from django.db.models import F

    org = make_org()
    agent = make_agent(org, "agent-a", workload_capacity=3)
    with CaptureQueriesContext(connection) as queries:
        update_where(Agent, {"pk": agent.pk}, role="Lead")
        update_where(Agent, {"pk": agent.pk}, workload_capacity=F("workload_capacity") + 1)
    agent.refresh_from_db()
    assert (agent.role, agent.workload_capacity) == ("Lead", 4)
    first, second = (q["sql"] for q in queries.captured_queries)
    assert first == f'UPDATE "organization_agent" SET "role" = \'Lead\' WHERE "id" = {agent.pk}'
    assert '"organization_agent"."id"' in second  # the ORM's own statement
