"""Managed agents waking one another, on a real Celery worker with a scripted model on 127.0.0.1
(docs/runtime.md, "What wakes a managed agent"): two agents that would wake each other for ever —
by a subtask on every wake, or a new task for each other — stop at RUNTIME_MAX_CHAIN_RUNS with the
held wake-up on the task's page and in the dashboard's "Needs attention", nothing lost; a human's
release lets the work go on; and a three-level split into 20 subtasks runs untouched by the
default bounds."""

import re
from itertools import count

import pytest
from django.conf import settings as django_settings
from django.db.models import Max
from django.urls import reverse

from organization.models import Agent, AgentRuntime
from runtime.context import context_of
from runtime.models import ACTIVE_STATUSES, Run, RunTrigger
from tasks import services
from tasks.models import Task
from tests.factories import make_admin_user, make_agent
from tests.fake_llm import Reply, ToolUse
from tests.runtime.conftest import wait_for
from tests.runtime.scripts import script

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.worker,
    pytest.mark.skipif(not django_settings.REDIS_URL, reason="needs Redis (REDIS_URL)"),
]


def on_the_fake_model(*agents) -> None:
    Agent.objects.filter(pk__in=[a.pk for a in agents]).update(
        llm_provider="openai", llm_model="fake"
    )


def held_and_quiet(org):
    """The held wake-ups of `org` once no run is queued or running, and nothing waits (else
    None: the chain is still going)."""
    if Run.objects.filter(organization=org, status__in=ACTIVE_STATUSES).exists():
        return None
    if RunTrigger.objects.filter(organization=org, run__isnull=True, held="").exists():
        return None
    return list(RunTrigger.objects.filter(organization=org).exclude(held=""))


def shown_to_a_human(client, org, task) -> tuple[str, str]:
    """(the held wake-ups' banner on the task's page, the dashboard's Needs attention count)."""
    page = client.get(reverse("admin:tasks_task_change", args=[task.pk])).content.decode()
    banner = re.search(
        r'<section class="banner blocked" id="held-wakes-banner">.*?</section>', page, re.S
    )
    index = client.get(reverse("admin:index"), {"organization": org.pk}).content.decode()
    attention = re.search(r'data-metric="needs_attention">([^<]*)<', index).group(1)
    return (banner.group(0) if banner else ""), attention


def test_a_subtask_for_the_other_on_every_wake_stops_at_the_bound_and_a_release_goes_on(
    cast, fake_llm, worker, settings, client
):
    """Lena answers every wake by splitting one more part of her task off for Alex; Alex answers
    (completing the part, whose end wakes Lena: subtasks_done). Eight runs in a row, then Lena's
    wake-up is held: her task stays hers with every part done, the reason on its page and in
    Needs attention. Released, Lena (no longer splitting) completes it."""
    settings.RUNTIME_MAX_CHAIN_RUNS = 8
    on_the_fake_model(cast.lena, cast.alex)
    parts, splitting = count(1), [True]
    launch = {}

    def split(call):
        if call.tool_results or not splitting[0]:
            return []
        return [
            ToolUse(
                "create_subtask",
                {"parent": launch["id"], "title": f"Part {next(parts)}", "agent_id": "agent-alex"},
            )
        ]

    def lenas_text(call):
        if splitting[0]:
            return "Alex has the next part." if call.tool_results else ""
        return "Launched: every part is in."

    script(fake_llm, cast.lena, Reply(text=lenas_text, tool_calls=split))
    script(fake_llm, cast.alex, "Part done.")
    task = Task.objects.create(organization=cast.org, title="Launch")  # its id for the script
    launch["id"] = task.pk
    services.task_assign(task=task, actor=cast.by_human, to=cast.lena)

    (held,) = wait_for(lambda: held_and_quiet(cast.org), timeout=90, interval=0.1)
    assert (held.agent, held.task, held.trigger, held.held) == (
        cast.lena,
        task,
        "subtasks_done",
        "chain",
    )
    runs = list(Run.objects.filter(organization=cast.org).order_by("pk"))
    assert [(r.agent.handle, r.depth, r.status) for r in runs] == [
        (("agent-lena", "agent-alex")[n % 2], n + 1, "completed") for n in range(8)
    ]
    # Nothing lost: the task is Lena's, open, its four parts done.
    task.refresh_from_db()
    assert (task.status, task.assignee) == ("assigned", cast.lena)
    assert list(task.subtasks.values_list("status", flat=True)) == ["completed"] * 4
    client.force_login(make_admin_user(cast.org))
    banner, attention = shown_to_a_human(client, cast.org, task)
    assert "8 runs in a row had woken one another" in banner and "Lena" in banner
    assert attention == "1"

    splitting[0] = False
    release = reverse("admin:tasks_task_runtime_release", args=[task.pk])
    assert client.post(release).status_code == 302

    def completed():
        task.refresh_from_db()
        return task.status == "completed" and held_and_quiet(cast.org) == []

    wait_for(completed, timeout=60, interval=0.1)
    assert task.result == "Launched: every part is in."
    last = Run.objects.filter(agent=cast.lena).latest("pk")
    assert (last.trigger, last.depth, last.status) == ("subtasks_done", 1, "completed")
    assert shown_to_a_human(client, cast.org, task) == ("", "0")


def test_a_new_task_for_each_other_on_every_wake_stops_at_the_bound(
    cast, fake_llm, worker, settings, client
):
    """Lena and Alex each answer every wake by creating a task for the other: six runs in a row,
    six favours asked, then the wake-up of the sixth is held — its task stays with its holder,
    assigned, shown on its page."""
    settings.RUNTIME_MAX_CHAIN_RUNS = 6
    on_the_fake_model(cast.lena, cast.alex)
    favours = count(1)

    def ask(other):
        def calls(call):
            if call.tool_results:
                return []
            return [ToolUse("create_task", {"title": f"Favour {next(favours)}", "agent_id": other})]

        return Reply(text=lambda call: "Asked." if call.tool_results else "", tool_calls=calls)

    script(fake_llm, cast.lena, ask("agent-alex"))
    script(fake_llm, cast.alex, ask("agent-lena"))
    first = cast.assign(cast.lena, "Start")

    (held,) = wait_for(lambda: held_and_quiet(cast.org), timeout=90, interval=0.1)
    runs = list(Run.objects.filter(organization=cast.org).order_by("pk"))
    assert [(r.agent.handle, r.depth, r.status) for r in runs] == [
        (("agent-lena", "agent-alex")[n % 2], n + 1, "completed") for n in range(6)
    ]
    sixth = Task.objects.get(title="Favour 6")
    assert (held.task, held.agent, held.trigger, held.held) == (
        sixth,
        cast.lena,
        "created",
        "chain",
    )
    assert (sixth.status, sixth.assignee) == ("assigned", cast.lena)
    done = Task.objects.filter(organization=cast.org, status="completed")
    assert sorted(done.values_list("title", flat=True)) == sorted(
        ["Start", *(f"Favour {n}" for n in range(1, 6))]
    )
    assert Task.objects.filter(organization=cast.org).count() == 7
    assert first.pk in done.values_list("pk", flat=True)
    client.force_login(make_admin_user(cast.org))
    banner, attention = shown_to_a_human(client, cast.org, sixth)
    assert "6 runs in a row had woken one another" in banner
    assert attention == "1"


def test_a_three_level_split_into_twenty_subtasks_runs_untouched_by_the_default_bounds(
    cast, fake_llm, worker
):
    """A director splits a project among her four managers, each among his four engineers: 20
    subtasks, every one worked and the project completed from them, none held."""
    assert (
        django_settings.RUNTIME_MAX_CHAIN_RUNS,
        django_settings.RUNTIME_MAX_AGENT_RUNS_PER_HOUR,
    ) == (50, 120)
    managed = {"runtime": AgentRuntime.MANAGED, "llm_provider": "openai", "llm_model": "fake"}
    director = make_agent(cast.org, "agent-dana", name="Dana", role="Director", **managed)
    for m in range(4):
        manager = make_agent(
            cast.org,
            f"agent-manager-{m}",
            name=f"Manager {m}",
            role="Manager",
            senior=director,
            **managed,
        )
        for e in range(4):
            make_agent(
                cast.org,
                f"agent-engineer-{m}{e}",
                name=f"Engineer {m}{e}",
                role="Engineer",
                senior=manager,
                **managed,
            )

    def split_among_reports(call):
        if call.tool_results:
            return []
        context = context_of(call.messages[0]["content"])
        return [
            ToolUse(
                "create_subtask",
                {"parent": task["id"], "title": f"{task['title']} / {r}", "agent_id": r},
            )
            for task in context["tasks"]
            if task["you_hold_it"]
            and not task["subtasks"]
            and task["status"] in ("assigned", "in_progress")
            for r in context["agent"]["reports"]
        ]

    fake_llm.on(
        replies=Reply(
            text=lambda call: "Split among my reports." if call.tool_results else "Done.",
            tool_calls=split_among_reports,
        )
    )
    project = cast.assign(director, "Project")

    def finished():
        project.refresh_from_db()
        return project.status == "completed" and held_and_quiet(cast.org) == []

    wait_for(finished, timeout=120, interval=0.2)
    subtasks = Task.objects.filter(organization=cast.org, parent__isnull=False)
    assert subtasks.count() == 20
    assert set(subtasks.values_list("status", flat=True)) == {"completed"}
    assert subtasks.filter(parent__parent=project).count() == 16
    assert not RunTrigger.objects.exclude(held="").exists()
    assert set(Run.objects.values_list("status", flat=True)) == {"completed"}
    # Director, manager, engineer, manager again, director again: 5 runs in a row at most.
    assert Run.objects.aggregate(deepest=Max("depth"))["deepest"] == 5
    assert project.result == "Done."
