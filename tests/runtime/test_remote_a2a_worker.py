"""End to end on a real Celery worker: a task delegated over REST to a remote A2A agent (the SDK's
server on 127.0.0.1) is sent by the worker and completed with the remote's answer; while the
remote works, the task counts in the agent's workload like any agent's."""

import asyncio
import threading

import pytest
from django.conf import settings

from organization.models import AgentRuntime
from organization.services import agent_card_refresh
from tests.conftest import KeyClient
from tests.factories import make_agent, make_key, make_org
from tests.runtime.conftest import wait_for

from .a2a_remote import RemoteAgent, completes

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.worker,
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)"),
]


def test_a_task_delegated_to_a_remote_a2a_agent_is_completed_by_it_on_the_worker(settings, worker):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True  # the remote listens on 127.0.0.1
    release = threading.Event()

    async def completes_when_released(updater, text):
        await asyncio.to_thread(release.wait, 20)
        await completes(updater, text)

    org = make_org("acme")
    lead = make_agent(org, "agent-lead", name="Lead")
    with RemoteAgent(completes_when_released) as remote:
        gopher = make_agent(
            org,
            "agent-gopher",
            name="Gopher",
            senior=lead,
            runtime=AgentRuntime.A2A,
            a2a_card_url=remote.card_url,
            workload_capacity=1,
        )
        agent_card_refresh(agent=gopher)
        client = KeyClient(make_key(org, lead))
        roster = {a["id"]: a for a in client.get("/api/agents").json()["results"]}
        assert (roster["agent-gopher"]["runtime"], roster["agent-gopher"]["expertise"]) == (
            "a2a",
            ["Go", "gRPC"],
        )

        created = client.post("/api/tasks", {"title": "Port the billing job"}, format="json")
        assert created.status_code == 201, created.json()
        task_id = created.json()["id"]
        delegated = client.post(
            f"/api/tasks/{task_id}/delegate", {"agent_id": "agent-gopher"}, format="json"
        )
        assert delegated.status_code == 200, delegated.json()

        # The worker sent it: in progress with the remote, counted in its workload, which is
        # full — a second task is refused as for any agent at capacity.
        wait_for(lambda: remote.executor.received, timeout=20)
        task = client.get(f"/api/tasks/{task_id}").json()
        assert (task["status"], task["assignee"]) == ("in_progress", "agent-gopher")
        roster = {a["id"]: a for a in client.get("/api/agents").json()["results"]}
        assert roster["agent-gopher"]["current_workload"] == 1
        second = client.post("/api/tasks", {"title": "Another one"}, format="json").json()
        refused = client.post(
            f"/api/tasks/{second['id']}/delegate", {"agent_id": "agent-gopher"}, format="json"
        )
        assert (refused.status_code, refused.json()["code"]) == (409, "capacity_exceeded")

        release.set()

        def completed():
            body = client.get(f"/api/tasks/{task_id}").json()
            return body if body["status"] == "completed" else None

        body = wait_for(completed, timeout=30, interval=0.1)
    assert body["result"] == "Done: Port the billing job"
    assert body["result_data"] == {"rows": 3, "checked": "Port the billing job"}
    assert remote.executor.received == ["Port the billing job"]
