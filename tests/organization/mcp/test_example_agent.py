"""examples/agent_loop.py, run as a user would, against a live server over MCP."""

import json
import re
import shlex
import subprocess
import sys

import pytest

from tasks.models import Task, TaskEvent
from tests.fake_llm import FakeLLM, Reply

from .conftest import BASE_DIR

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = BASE_DIR / "examples" / "agent_loop.py"


def run_loop(url: str, key: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--url", url, "--key", key, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture
def loop_env(subprocess_env):
    env = {k: v for k, v in subprocess_env.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    return env


def test_offline_it_takes_a_task_and_delegates_it(live_url, demo_org, key_of, loop_env):
    done = run_loop(
        live_url,
        key_of(demo_org, "agent-sarah"),
        loop_env,
        "--create-task",
        "Speed up the orders query",
        "--expertise",
        "PostgreSQL",
        "--once",
    )
    out = done.stdout
    assert "deciding with the offline provider" in out
    assert "I am Sarah (agent-sarah), 4/5 tasks; 6 colleagues" in out
    assert "DELEGATION DECISION:\nPrimary Choice: Alex (" in out
    assert "Decision: DELEGATE (agent-alex)" in out
    assert "Reasoning: Alex is the best match (priority 1" in out
    task = Task.objects.get(title="Speed up the orders query")
    assert task.assignee.handle == "agent-alex"
    assert task.delegation_chain == ["agent-sarah", "agent-alex"]
    event = TaskEvent.objects.filter(task=task, recipient__handle="agent-alex").latest("pk")
    assert event.decision == "DELEGATE"


def readme_example() -> tuple[str, list[str], str]:
    """docs/clients.md's "The example agent": the key command, the script's arguments, the
    output shown."""
    text = (BASE_DIR / "docs" / "clients.md").read_text()
    section = text.split("\n## The example agent\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    shell = next(body for lang, body in blocks if lang == "sh").replace("\\\n", " ")
    output = next(body for lang, body in blocks if lang == "")
    key_line = next(line for line in shell.splitlines() if "create_api_key" in line)
    args = shlex.split(shell.split("examples/agent_loop.py", 1)[1].splitlines()[0])
    return key_line, args, output


def test_the_readme_example_runs_as_shown(live_url, demo_org, key_of, loop_env):
    """docs/clients.md's command, run against the demo organization offline, prints its output."""
    key_line, args, shown = readme_example()
    assert "--org demo --agent agent-sarah" in key_line
    assert args[:2] == ["--key", "$KEY"]
    done = run_loop(live_url, key_of(demo_org, "agent-sarah"), loop_env, *args[2:])

    def normal(text: str) -> str:
        return re.sub(r"#\d+", "#N", text).strip()

    assert normal(done.stdout) == normal(shown)


def run_with_model(url: str, key: str, env: dict, answer: dict, title: str):
    """One `--once --model fake-model` run whose model answers `answer`; the output and its calls."""
    with FakeLLM() as fake:
        fake.on(contains="DELEGATION DECISION", replies=[Reply(json.dumps(answer))])
        done = run_loop(
            url,
            key,
            {**env, **fake.env()},
            "--create-task",
            title,
            "--expertise",
            "PostgreSQL",
            "--once",
            "--model",
            "fake-model",
        )
    return done, [c for c in fake.calls if c.api == "openai"]


def test_with_a_model_it_follows_the_models_choice(live_url, demo_org, key_of, loop_env):
    answer = {
        "decision": "QUEUE",
        "agent_id": "agent-database-lead",
        "primary_reason": "Morgan is our PostgreSQL lead",
        "fallback": "Alex",
        "reasoning": "The model prefers the database lead, who frees up soon.",
        "notes": "model-made",
    }
    key = key_of(demo_org, "agent-sarah")
    done, (call,) = run_with_model(live_url, key, loop_env, answer, "Partition the orders table")
    assert "deciding with fake-model" in done.stdout
    assert "Decision: QUEUE (agent-database-lead)" in done.stdout
    assert "Reasoning: The model prefers the database lead" in done.stdout
    # The model was given the agent's own system prompt: its organizational context.
    assert "Sarah" in call.system
    assert "agent-database-lead" in call.prompt
    task = Task.objects.get(title="Partition the orders table")
    assert task.status == "queued"
    assert task.queued_for.handle == "agent-database-lead"


def test_a_refused_choice_is_escalated(live_url, demo_org, key_of, loop_env):
    """The model picks a full expert: the orchestrator says 409 and the loop escalates."""
    answer = {"decision": "DELEGATE", "agent_id": "agent-database-lead", "reasoning": "Morgan."}
    key = key_of(demo_org, "agent-sarah")
    done, model_calls = run_with_model(live_url, key, loop_env, answer, "Vacuum the orders table")
    assert model_calls
    assert "refused: capacity_exceeded" in done.stdout
    task = Task.objects.get(title="Vacuum the orders table")
    assert task.assignee.handle == "agent-alice"  # Sarah's senior
