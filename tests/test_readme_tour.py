"""The README's tour and the docs' examples, followed literally and in order, against a live
server (issue 8 §5).

The shell blocks are taken as they are from README.md (the tour) and the reference it leads to
(docs/api.md: roster, agents, hierarchy; docs/tasks.md; docs/collaboration.md; docs/costs.md), the address
swapped for the live server's, and run by bash on a freshly seeded demo, with a Celery worker (in
this process, on the broker of REDIS_URL) as `make run` has one: the tour watches a managed agent
at work. `curl` is wrapped only to note each answer's status: every call must succeed.
"""

import io
import re
import subprocess

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.core.management import call_command

from config.celery import app
from tasks.models import Task
from tests.organization.mcp.conftest import database_url
from tests.organization.mcp.live import LiveServer

# It runs a Celery worker (the tour's managed agents work on it): with the real-worker tests.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

# (file, section heading, which of its sh blocks), in the order a reader follows them.
TOUR = [
    ("README.md", "## A 5-minute tour", 0),
    ("README.md", "## A 5-minute tour", 1),
    ("README.md", "## A 5-minute tour", 2),
    ("README.md", "## A 5-minute tour", 3),
    ("docs/api.md", "## Roster and tools", 0),
    ("docs/api.md", "## Agents and teams", 0),
    ("docs/api.md", "## Team hierarchy (seed 003)", 0),
    ("docs/tasks.md", "## Examples (curl)", 0),
    ("docs/collaboration.md", "## The session API", 0),
    ("docs/costs.md", "## Examples (curl)", 0),
]
WRAPPER = """
curl() { command curl -w '%{stderr}STATUS %{http_code} %{method} %{url_effective}\\n' "$@"; }
"""


def section(text: str, heading: str) -> str:
    """The lines under `heading` up to the next heading of its level or above (not in code)."""
    level = len(heading.split()[0])
    lines = text.splitlines()
    start = lines.index(heading) + 1
    fenced = False
    for end in range(start, len(lines)):
        line = lines[end]
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(rf"#{{1,{level}}} ", line):
            break
    return "\n".join(lines[start:end]) + "\n"


def tour_script(base_url: str) -> str:
    blocks = []
    for file, heading, index in TOUR:
        text = (settings.BASE_DIR / file).read_text()
        shell = re.findall(r"^( *)```sh\n(.*?)^ *```", section(text, heading), re.S | re.M)
        indent, body = shell[index]
        blocks.append(re.sub(rf"^{indent}", "", body, flags=re.M))
    return WRAPPER + "\n".join(blocks).replace("http://127.0.0.1:8000", base_url)


def test_the_readme_tour_works_when_followed_literally_in_order(tmp_path, settings):
    url = database_url()
    if url is None:
        pytest.skip("the test database is in-memory SQLite: a subprocess cannot share it")
    if not settings.REDIS_URL:
        pytest.skip("the tour's managed agents run on a worker: needs Redis (REDIS_URL)")
    # The managed agents' runs use the offline provider, whatever keys the machine has.
    settings.LLM_PROVIDER = "offline"
    call_command("seed_demo", stdout=io.StringIO())
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    worker = start_worker(
        app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"
    )
    with worker, LiveServer() as server:
        # What a reader's shell has, plus the database and the key file `make run` would use.
        key_file = tmp_path / "secret_key"
        key_file.write_text("readme-tour-" + "x" * 50)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": "/tmp",
            "DATABASE_URL": url,
            "SECRET_KEY_FILE": str(key_file),
        }
        done = subprocess.run(
            ["bash", "-c", tour_script(server.url)],
            cwd=settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    calls = re.findall(r"^STATUS (\d{3}) (\w+) (\S+)$", done.stderr, re.M)
    assert len(calls) >= 30, done.stderr
    failed = [
        (status, method, path)
        for status, method, path in calls
        # Cancelling the tour's session once a worker finished it is a 409, as the docs say.
        if not (status in {"200", "201", "202"} or (status == "409" and path.endswith("/cancel")))
    ]
    assert failed == [], done.stdout[-3000:]
    # The task examples really moved tasks (no 403 from enforcement left on, no id 42).
    assert '"assignee":"agent-alex"' in done.stdout.replace(" ", "")
    assert '"status":"in_progress"' in done.stdout.replace(" ", "")
    # The managed agents worked the tour's task: Alice delegated it to Alex, who completed it.
    tour = Task.objects.get(title="Speed up the search query")
    assert (tour.status, tour.assignee.handle) == ("completed", "agent-alex")
    assert "offline provider" in tour.result
    assert '"agent":"agent-alice","task":' in done.stdout.replace(" ", "")
    # The costs examples: Sarah's own call is in the ledger, priced from the table.
    assert '"key":"agent-sarah"' in done.stdout.replace(" ", "")
    assert '"self_reported":true' in done.stdout.replace(" ", "")
    # The decisions step: Sarah's cross-team delegation waited, was approved, and went on.
    mockup = Task.objects.get(title="Mock up the search page")
    assert mockup.assignee.handle == "agent-taylor"
    assert mockup.decisions.get().outcome == {"result": "executed", "reason": ""}
    assert mockup.runs.filter(trigger="decision", agent__handle="agent-sarah").exists()
    # The A2A step: Jordan, at capacity, refuses the message as POST /api/tasks would.
    answer = done.stdout.replace(" ", "")
    assert '"state":"TASK_STATE_REJECTED"' in answer and '"code":"capacity_exceeded"' in answer
    assert not Task.objects.filter(title="Rotate the staging keys").exists()
