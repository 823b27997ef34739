"""`seed_demo`: the demo organization at work, made through the services, and never touching
real work (issue 8 §5). It runs the demo's collaboration in-process, whose agent threads read
committed rows: hence `transaction=True`."""

from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command

from costs.budgets import budget_set
from organization.caller import Caller
from organization.models import Agent
from runtime.models import Run
from tasks.events import snapshot
from tasks.models import HELD_STATUSES, Task, TaskEvent
from tests.collaboration.conftest import fake_llm  # noqa: F401  (a fixture)
from tests.conftest import KeyClient
from tests.factories import give_tasks, make_admin_user, make_agent, make_key

pytestmark = pytest.mark.django_db(transaction=True)


def seed(*args) -> str:
    out = StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def every_row() -> dict:
    """Every row of every model, every column: a change anywhere shows."""
    return {
        model._meta.label: list(model._default_manager.order_by("pk").values())
        for model in apps.get_models()
    }


def human_client(org) -> KeyClient:
    return KeyClient(make_key(org))


def test_seed_demo_a_second_and_third_time_changes_no_row():
    seed()
    first = every_row()
    assert "nothing to add" in seed()
    seed()
    assert every_row() == first


def test_seed_demo_never_touches_a_task_the_user_created():
    seed()
    org_client = human_client(Agent.objects.get(handle="agent-alex").organization)
    created = org_client.post(
        "/api/tasks",
        {"title": "My real work", "agent_id": "agent-alex"},
        format="json",
    )
    assert created.status_code == 201
    before = every_row()
    seed()
    mine = Task.objects.get(pk=created.json()["id"])
    assert (mine.status, mine.assignee.handle, mine.finished_at) == ("assigned", "agent-alex", None)
    assert every_row() == before


def test_seed_demo_skips_a_story_that_no_longer_fits_and_leaves_the_users_tasks():
    seed()
    org = Agent.objects.get(handle="agent-jordan").organization
    # The user cleared every demo task and gave Alex a full load of real work.
    Task.objects.filter(organization=org).delete()
    alex = Agent.objects.get(handle="agent-alex")
    mine = give_tasks(alex, 5)
    out = seed()
    assert "Skipped the demo task 'Add an index for the invoices query'" in out
    assert Task.objects.filter(assignee=alex, status__in=HELD_STATUSES).count() == 5
    assert set(Task.objects.filter(assignee=alex).values_list("pk", flat=True)) == {
        t.pk for t in mine
    }
    assert not Task.objects.filter(title="Add an index for the invoices query").exists()


def test_every_demo_task_has_its_whole_history_from_its_created_event():
    seed()
    tasks = Task.objects.filter(organization__slug="demo")
    # 18 held, 3 delegated, 1 queued, 1 escalated; the managed story: a parent and 3 subtasks.
    assert tasks.count() == 27
    for task in tasks:
        events = list(TaskEvent.objects.filter(task=task).order_by("created_at", "pk"))
        assert events[0].kind == "created", task.title
        for previous, event in zip(events, events[1:], strict=False):
            assert event.before == previous.after, task.title
        assert events[-1].after == snapshot(task), task.title


def test_the_demo_shows_the_organization_at_work():
    seed()
    org = Agent.objects.get(handle="agent-sarah").organization
    client = human_client(org)

    # The three demo delegations (Alice's three of the managed story are subtasks).
    delegated = TaskEvent.objects.filter(organization_id=org.pk, kind="delegated")
    assert delegated.count() == 6
    assert all(e.decision == "DELEGATE" and e.primary_reason for e in delegated)
    seeded = delegated.filter(task__parent__isnull=True)
    assert seeded.count() == 3 and all(e.fallback for e in seeded)

    queued = client.get("/api/tasks", {"status": "queued"}).json()["results"]
    assert [(t["title"], t["queued_for"]) for t in queued] == [
        ("Add a Redis cache to the product pages", "agent-database-lead")
    ]
    morgan = client.get("/api/agents/agent-database-lead").json()
    assert (morgan["status"], morgan["current_workload"]) == ("busy", 5)

    escalated = client.get("/api/tasks", {"status": "escalated"}).json()["results"]
    assert [(t["title"], t["assignee"]) for t in escalated] == [
        ("Raise the AWS account limits", None)
    ]
    blocked = client.get("/api/tasks", {"status": "blocked"}).json()["results"]
    assert [(t["title"], t["assignee"]) for t in blocked] == [
        ("Move the CI runners to AWS spot instances", "agent-jordan")
    ]

    sessions = client.get("/api/collaborations").json()["results"]
    assert len(sessions) == 1
    session = client.get(f"/api/collaborations/{sessions[0]['id']}").json()
    assert session["status"] == "completed"
    assert session["created_by"] == "agent-alice"
    assert [(c["agent"], c["status"], c["provider"]) for c in session["contributions"]] == [
        ("agent-alex", "completed", "offline"),
        ("agent-database-lead", "completed", "offline"),
        ("agent-jordan", "completed", "offline"),
    ]
    assert session["events"][-1]["name"] == "tool:collaborative:complete"


def test_the_admin_lists_the_escalated_demo_task_under_needs_attention(client):
    seed()
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("boss", password="pw-for-tests-only")
    client.force_login(admin)
    page = client.get("/admin/tasks/task/", {"attention": "needs"})
    assert page.status_code == 200
    assert "Raise the AWS account limits" in page.content.decode()


def test_the_demos_managed_agents_worked_a_task_for_alice_offline():
    """Issue 11 §2: `make run` with no key shows managed agents at work — a task created for
    Alice (a manager) ends with delegations, subtasks, results and a completed parent."""
    seed()
    org = Agent.objects.get(handle="agent-alice").organization
    managed = set(org.agents.filter(runtime="managed").values_list("handle", flat=True))
    assert managed == {"agent-alice", "agent-sarah", "agent-alex", "agent-taylor"}
    client = human_client(org)
    story = Task.objects.get(organization=org, title="Launch the customer portal")
    body = client.get(f"/api/tasks/{story.pk}").json()
    assert (body["status"], body["assignee"]) == ("completed", "agent-alice")
    assert body["result"].startswith("[offline provider")
    assert body["subtask_progress"] == {"done": 3, "total": 3}
    assert [(s["assignee"], s["status"]) for s in body["subtasks"]] == [
        ("agent-sarah", "completed"),
        ("agent-taylor", "completed"),
        ("agent-alex", "completed"),
    ]
    for sub in body["subtasks"]:
        assert "placeholder result" in sub["result"]
        delegated = TaskEvent.objects.get(task_id=sub["id"], kind="delegated")
        assert (delegated.actor_label, delegated.decision) == ("agent-alice", "DELEGATE")
    runs = client.get("/api/runs", {"status": "completed"}).json()["results"]
    assert [(r["agent"], r["trigger"]) for r in reversed(runs)] == [
        ("agent-alice", "created"),
        ("agent-sarah", "delegated"),
        ("agent-taylor", "delegated"),
        ("agent-alex", "delegated"),
        ("agent-alice", "subtasks_done"),
    ]
    assert client.get("/api/runs", {"status": "queued"}).json()["results"] == []
    # The demo's own held work is as it was: Alice holds her 4 demo tasks again.
    alice = client.get("/api/agents/agent-alice").json()
    assert (alice["current_workload"], alice["runtime"]) == (4, "managed")


def test_seed_demo_calls_no_model_whatever_provider_is_configured(fake_llm):  # noqa: F811
    """LLM_PROVIDER=openai with a key (the fake model on 127.0.0.1): the demo is still offline."""
    seed()
    assert fake_llm.calls == []
    story = Task.objects.get(title="Launch the customer portal")
    assert (story.status, story.result.startswith("[offline provider")) == ("completed", True)
    managed = Agent.objects.filter(organization=story.organization, runtime="managed")
    assert set(managed.values_list("llm_provider", flat=True)) == {"offline"}


def test_no_demo_agent_that_is_managed_holds_work_it_never_started():
    seed()
    unstarted = Task.objects.filter(assignee__runtime="managed", status="assigned")
    assert list(unstarted.values_list("title", flat=True)) == []


def test_a_budget_for_a_new_agent_of_the_demo_wakes_nobody():
    """A $0 budget set for one new agent is no reason for any managed agent to run."""
    seed()
    org = Agent.objects.get(handle="agent-alice").organization
    make_agent(org, "agent-new", name="New")
    before = (
        list(Run.objects.order_by("pk").values_list("pk", flat=True)),
        list(Task.objects.order_by("pk").values_list("pk", "status")),
    )
    human = Caller(organization=org, user=make_admin_user(org))
    budget_set(caller=human, scope="agent", agent="agent-new", limit_usd="0")
    budget_set(caller=human, scope="organization", limit_usd="50")
    budget_set(caller=human, scope="organization", limit_usd="20")
    after = (
        list(Run.objects.order_by("pk").values_list("pk", flat=True)),
        list(Task.objects.order_by("pk").values_list("pk", "status")),
    )
    assert after == before


def test_seed_demo_adds_a_weekly_dependency_review_development_owns():
    from routines.models import Routine

    seed()
    (routine,) = Routine.objects.filter(organization__slug="demo")
    assert (routine.team.name, routine.cron, routine.enabled) == ("Development", "0 9 * * 1", True)
    assert routine.periodic_task.enabled and routine.next_run_at.weekday() == 0
    routine.enabled = False  # the user's change stays
    routine.save()
    seed()
    assert Routine.objects.get().enabled is False
