"""The service scaled out over several hosts (issue 39 §3): two web hosts behind a round-robin
balancer, two worker hosts and one beat host, each a Linux network namespace of this machine,
sharing one PostgreSQL database and one Redis database. A burst of tasks for managed agents goes
through both web hosts; a worker host dies in the middle of their runs; every task is done once,
every run finishes, every model call is charged once, and the beat stays single.

The hosts reach PostgreSQL, Redis and the fake model server through relays on the bridge's
gateway address (tests/deploy/netns_hosts.py). They run the production commands on the test
database, with a short lease and the beat's run sweep every second, so that the dead host's runs
are resumed by the other worker within seconds.
"""

import json
import os
import re
import sys
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from costs.models import UsageRecord
from organization.models import AgentRuntime
from runtime.apps import RUN_SWEEP_NAME
from runtime.models import Run
from tasks.models import Task, TaskEvent
from tests.collaboration.conftest import fresh_pool, wait_for  # noqa: F401  (a fixture)
from tests.collaboration.test_durability import database_url
from tests.conftest import requires_postgres
from tests.deploy.netns_hosts import Host, Listener, Network, Relay, netns_available
from tests.factories import make_agent, make_key, make_org
from tests.fake_llm import FakeLLM, Reply, ToolUse
from tests.runtime.conftest import flush_redis

pytestmark = [
    requires_postgres(),
    pytest.mark.postgres,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_pool"),
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)"),
    # CI runs as root: there it must run (the `network` fixture fails if it cannot).
    pytest.mark.skipif(
        os.environ.get("CI") != "true" and not netns_available(),
        reason="needs root and iproute2 (ip netns)",
    ),
]

BASE_DIR = Path(__file__).resolve().parents[2]
TASKS = 8
LEASE = 3  # seconds without a heartbeat before a run counts as lost
WEB_PORT = 8000
# Every model call costs exactly one cent: 10 input tokens at $1000 per million.
PRICES = {"openai/fake-model": {"input": 1000, "output": 0}}
CALL_USD = Decimal("0.01")


@dataclass
class Deployment:
    webs: list[Host]
    workers: list[Host]
    beat: Host
    balancer: Listener  # what the clients call
    model: Listener  # the hosts' way to the model server
    logs: Path

    def log(self, role: str) -> str:
        return (self.logs / f"{role}.log").read_text()

    def tails(self) -> str:
        """The end of every host's log, for a failure's message."""
        return "\n".join(
            f"== {p.stem}\n{p.read_text()[-2500:]}" for p in sorted(self.logs.glob("*.log"))
        )


def with_host(url: str, host: str, port: int) -> str:
    """`url` pointing at host:port instead (its credentials, path and query kept)."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@{host}:{port}" if credentials else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def http(method: str, url: str, body: dict | None = None, headers: dict | None = None):
    """(status, JSON body) of one request on a connection of its own; (None, None) unreachable."""
    request = urllib.request.Request(
        url,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, None
    except OSError:
        return None, None


@pytest.fixture
def network():
    """The hosts' network; torn down (processes, namespaces, bridge) whatever happens."""
    if not netns_available():
        pytest.fail(
            "CI=true: the scale-out test needs root and iproute2 (apt-get install iproute2)"
        )
    with Network() as net:
        yield net


@pytest.fixture
def fake():
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def deployment(network, fake, transactional_db, tmp_path):
    """Two web hosts behind the balancer, two worker hosts and a beat host, started and ready."""
    # The beat's run sweep every second (seeded every RUNTIME_SWEEP_SECONDS, 30 by default).
    every, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    assert PeriodicTask.objects.filter(name=RUN_SWEEP_NAME).update(interval=every) == 1
    flush_redis()
    with Relay() as relay:
        gateway, db = network.gateway, connection.settings_dict
        pg = relay.listen(gateway, 0, [(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432))])
        redis = urlsplit(settings.REDIS_URL)
        broker = relay.listen(gateway, 0, [(redis.hostname, redis.port or 6379)])
        model = relay.listen(gateway, 0, [("127.0.0.1", urlsplit(fake.url).port)])
        redis_url = with_host(settings.REDIS_URL, gateway, broker.port)
        env = {
            **os.environ,
            "DATABASE_URL": with_host(database_url(), gateway, pg.port),
            "DATABASE_POOL_MAX_SIZE": "6",
            "REDIS_URL": redis_url,
            "CELERY_BROKER_URL": redis_url,
            "OPENAI_BASE_URL": f"http://{gateway}:{model.port}/v1",
            "OPENAI_API_KEY": "fake-openai-key",
            "LLM_PRICES": json.dumps(PRICES),
            "RUNTIME_LEASE_SECONDS": str(LEASE),
        }
        env.pop("TEST_DATABASE_NAME", None)

        def start(role: str, *argv: str) -> Host:
            """A new host running `python argv` (`{address}` in it: the host's own)."""
            host = network.add_host(role)
            log = open(tmp_path / f"{role}.log", "w")  # noqa: SIM115 (closed with the process)
            argv = [sys.executable, *(a.format(address=host.address) for a in argv)]
            host.start(argv, env=env, cwd=BASE_DIR, log=log)
            return host

        serve = ["-m", "config.serve", "--host", "{address}", "--port", str(WEB_PORT)]
        worker = ["-m", "celery", "-A", "config", "worker", "-l", "INFO", "-n"]
        webs = [start(f"web-{n}", *serve, "--workers", "1") for n in "ab"]
        workers = [start(f"worker-{n}", *worker, f"worker-{n}@%h") for n in "ab"]
        # DEBUG: the beat logs the id of each task it sends.
        beat = start("beat", "-m", "celery", "-A", "config", "beat", "-l", "DEBUG")
        balancer = relay.listen("127.0.0.1", 0, [(web.address, WEB_PORT) for web in webs])
        up = Deployment(webs, workers, beat, balancer, model, tmp_path)

        try:
            for web in webs:  # with a Host header the service accepts
                health = f"http://{web.address}:{WEB_PORT}/healthz"
                wait_for(
                    lambda u=health: http("GET", u, headers={"Host": "localhost"})[0] == 200, 60
                )
            for role in ("worker-a", "worker-b"):
                wait_for(lambda role=role: " ready." in up.log(role), 60, interval=0.1)
            yield up
        finally:
            # The hosts go before the relays, so they never see their database cut off; what
            # they left in Redis (a sweep queued, work unacked) goes with them.
            for host in network.hosts.values():
                host.kill()
            flush_redis()


def start_own_task(call) -> list[ToolUse]:
    """The run starts the task it was woken for: a writing call, which must not be made twice."""
    task_id = int(re.search(r"task #(\d+)", call.prompt).group(1))
    return [ToolUse("update_task_status", {"task_id": task_id, "status": "in_progress"})]


def managed_agents(org, fake: FakeLLM) -> list:
    """TASKS managed agents on the fake model. Each starts its task, then answers — an answer that
    waits for `fake.release()`, so it is in flight when a host dies; a run that asks again gets
    it at once (the last reply repeats)."""
    agents = []
    for n in range(TASKS):
        agent = make_agent(
            org,
            f"agent-{n}",
            runtime=AgentRuntime.MANAGED,
            llm_provider="openai",
            llm_model="fake-model",
        )
        usage = {"prompt_tokens": 10, "completion_tokens": 10}
        fake.on(
            agent=agent.handle,
            replies=[
                Reply(tool_calls=start_own_task, **usage),
                Reply(f"Done by {agent.handle}.", hang=True, **usage),
            ],
        )
        agents.append(agent)
    return agents


def test_a_burst_survives_a_dead_worker_host(deployment, fake):
    org = make_org("acme")
    agents = managed_agents(org, fake)
    key = make_key(org)

    # The burst, a connection per request: the balancer alternates between the web hosts.
    created = []
    for agent in agents:
        status, body = http(
            "POST",
            f"http://127.0.0.1:{deployment.balancer.port}/api/tasks",
            {"title": f"Job for {agent.handle}", "agent_id": agent.handle},
            {"Authorization": f"Bearer {key}"},
        )
        assert status == 201, (status, deployment.tails())
        created.append(body["id"])
    assert sorted(deployment.balancer.served.values()) == [TASKS // 2, TASKS // 2]

    # Every run has started its task and waits for its answer (its second call), on both worker
    # hosts: each call passes the relay, where it waits, before the model sees it.
    model = deployment.model
    wait_for(lambda: len(fake.calls) == 2 * TASKS, 60)
    in_flight = model.awaiting_answer()
    assert sum(in_flight.values()) == TASKS
    assert set(in_flight) == {host.address for host in deployment.workers}, in_flight
    victim = max(deployment.workers, key=lambda host: in_flight[host.address])
    lost = in_flight[victim.address]
    victim.kill()
    # The dead host's calls end unanswered before the model answers the others.
    wait_for(lambda: sum(1 for c in fake.calls if c.ended and not c.answered) == lost, 20)
    fake.release()

    def all_finished():
        runs = list(Run.objects.filter(organization=org))
        return runs if len(runs) == TASKS and all(r.is_finished for r in runs) else None

    try:
        runs = wait_for(all_finished, 60, interval=0.1)
    except AssertionError:
        runs = list(Run.objects.values("status", "attempts", "error"))
        pytest.fail(f"runs not finished: {runs}\n{deployment.tails()}")

    # Every run finished: the dead host's on a second start (the other worker's), the rest on
    # their first.
    assert {r.status for r in runs} == {"completed"}, deployment.tails()
    assert sorted(r.attempts for r in runs) == [1] * (TASKS - lost) + [2] * lost
    # Every task done once, with its agent's answer, and started once (not again on resume).
    for task in Task.objects.filter(pk__in=created).select_related("assignee"):
        assert (task.status, task.result) == ("completed", f"Done by {task.assignee.handle}.")
        events = TaskEvent.objects.filter(task=task).order_by("pk").values_list("kind", "after")
        assert [(kind, after["status"]) for kind, after in events] == [
            ("created", "assigned"),
            ("status_changed", "in_progress"),
            ("status_changed", "completed"),
        ]
    # One charge per answered model call; none for the calls the dead host left unanswered.
    answered = [c for c in fake.calls if c.answered]
    assert len(answered) == 2 * TASKS
    ledger = UsageRecord.objects.filter(organization=org)
    assert sorted(ledger.values_list("state", flat=True)) == ["recorded"] * len(answered)
    assert sum(ledger.values_list("cost_usd", flat=True)) == CALL_USD * len(answered)
    per_run = Counter(ledger.values_list("run_id", flat=True))
    assert per_run == {run.pk: 2 for run in runs}  # its tool call's turn and its answer

    # One beat in the deployment, alive throughout ...
    hosts = [*deployment.webs, *deployment.workers, deployment.beat]
    beats = [
        host.role
        for host in hosts
        if not host.gone
        for line in host.commands()
        if re.search(r"celery .*\bbeat\b", line)
    ]
    assert beats == ["beat"]
    assert deployment.beat.processes[0].poll() is None
    # ... the only sender of the sweeps the workers ran (a second one, say a worker's `-B`, would
    # send ids of its own), each sweep run once.
    sent = re.findall(r"runtime\.sweep_runs sent\. id->(\S+)", deployment.log("beat"))
    ran = re.findall(
        r"Task runtime\.sweep_runs\[(\S+)\] succeeded",
        deployment.log("worker-a") + deployment.log("worker-b"),
    )
    assert ran, "no sweep ran"
    assert set(ran) <= set(sent)
    assert len(ran) == len(set(ran))
