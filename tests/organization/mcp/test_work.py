"""Real work over MCP (streamable HTTP, the SDK's client): tasks with the engine's rules, and a
collaborative session run by a real Celery worker with the offline provider."""

import asyncio
import time

import pytest

from organization.models import TeamRule
from tasks.models import Task, TaskEvent
from tests.collaboration.conftest import offline  # noqa: F401  (a fixture)

from .live import calls, data, http_client, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_create_and_delegate_a_task(live_url, demo_org, key_of):
    (created,) = run(
        calls(
            live_url,
            key_of(demo_org, "agent-sarah"),
            (
                "create_task",
                {
                    "title": "Index the orders table",
                    "required_expertise": "PostgreSQL",
                    "agent_id": "agent-sarah",
                },
            ),
        )
    )
    assert created.is_error is False, created.content[0].text
    task = data(created)
    assert task["assignee"] == "agent-sarah"
    assert task["status"] == "assigned"

    (delegated,) = run(
        calls(
            live_url,
            key_of(demo_org, "agent-sarah"),
            (
                "delegate_task",
                {
                    "task_id": task["id"],
                    "agent_id": "agent-alex",
                    "primary_reason": "Tier 1: PostgreSQL expert with capacity",
                    "fallback": "agent-database-lead",
                    "reasoning": "Alex is idle (1/5)",
                },
            ),
        )
    )
    assert delegated.is_error is False, delegated.content[0].text
    assert data(delegated)["assignee"] == "agent-alex"
    assert data(delegated)["delegation_chain"] == ["agent-sarah", "agent-alex"]
    assert Task.objects.get(pk=task["id"]).assignee.handle == "agent-alex"
    event = TaskEvent.objects.filter(task_id=task["id"]).order_by("-pk").first()
    assert event.recipient.handle == "agent-alex"


def test_a_rule_violation_is_a_403_tool_error(live_url, demo_org, key_of):
    TeamRule.objects.filter(organization=demo_org).update(require_supervisor_for_tasks=True)
    (refused,) = run(
        calls(
            live_url,
            key_of(demo_org, "agent-sarah"),
            ("create_task", {"title": "Peer work", "agent_id": "agent-alex"}),
        )
    )
    assert refused.is_error is True
    assert data(refused)["code"] == "role_forbidden"
    assert data(refused)["status"] == 403
    assert data(refused)["success"] is False
    assert not Task.objects.filter(title="Peer work").exists()


def test_capacity_offline_and_loops_are_409_tool_errors(live_url, demo_org, key_of):
    key = key_of(demo_org, "agent-alex")
    created, to_jordan, to_sam = run(
        calls(
            live_url,
            key,
            ("create_task", {"title": "Deploy", "agent_id": "agent-alex"}),
            ("create_task", {"title": "Too much", "agent_id": "agent-jordan"}),
            ("create_task", {"title": "Nobody home", "agent_id": "agent-sam"}),
        )
    )
    assert data(to_jordan)["code"] == "capacity_exceeded"
    assert data(to_jordan)["status"] == 409
    assert data(to_sam)["code"] == "agent_offline"
    assert data(to_sam)["status"] == 409

    task_id = data(created)["id"]
    (to_sarah,) = run(
        calls(live_url, key, ("delegate_task", {"task_id": task_id, "agent_id": "agent-sarah"}))
    )
    assert to_sarah.is_error is False, to_sarah.content[0].text
    (back,) = run(
        calls(
            live_url,
            key_of(demo_org, "agent-sarah"),
            ("delegate_task", {"task_id": task_id, "agent_id": "agent-alex"}),
        )
    )
    assert back.is_error is True
    assert data(back)["code"] == "delegation_loop"
    assert data(back)["status"] == 409


def test_another_agents_task_is_404(live_url, demo_org, key_of):
    (created,) = run(
        calls(
            live_url,
            key_of(demo_org, "agent-alex"),
            ("create_task", {"title": "Mine", "agent_id": "agent-alex"}),
        )
    )
    (hidden,) = run(
        calls(
            live_url,
            key_of(demo_org, "agent-taylor"),
            ("delegate_task", {"task_id": data(created)["id"], "agent_id": "agent-sarah"}),
        )
    )
    assert data(hidden)["code"] == "task_not_found"
    assert data(hidden)["status"] == 404


@pytest.mark.usefixtures("offline")
def test_start_a_collaboration_and_read_its_result(live_url, demo_org, key_of, worker):
    key = key_of(demo_org, "agent-sarah")

    async def scenario():
        async with http_client(live_url, key, read_timeout_seconds=60) as client:
            started = await client.call_tool(
                "start_collaboration",
                {
                    "task": "Should the orders API paginate with cursors?",
                    "agents": [
                        {"agent_id": "agent-alex", "focus": "the database"},
                        {"agent_id": "agent-taylor", "focus": "the user experience"},
                    ],
                    "mode": "parallel",
                    "synthesis": "merge",
                },
            )
            assert started.is_error is False, started.content[0].text
            session_id = data(started)["id"]
            deadline = time.monotonic() + 60
            while True:
                read = await client.call_tool("get_collaboration", {"session_id": session_id})
                assert read.is_error is False, read.content[0].text
                if data(read)["status"] in ("completed", "failed", "cancelled"):
                    return data(read)
                assert time.monotonic() < deadline, data(read)["status"]
                await asyncio.sleep(0.1)

    session = run(scenario())
    assert session["status"] == "completed", session
    assert session["result"]
    assert "offline" in session["result"].lower()
    contributions = {c["agent"]: c for c in session["contributions"]}
    assert sorted(contributions) == ["agent-alex", "agent-taylor"]
    assert all(c["is_org_agent"] and c["provider"] == "offline" for c in contributions.values())
