"""The OpenAI Agents SDK, unmodified, in strict mode against our /mcp: a client no one here wrote.

The SDK lists our tools over streamable HTTP, turns each schema strict (every object closed, every
property required: what OpenAI's strict function calling accepts), offers them to its model — the
fake LLM, a real HTTP server speaking chat completions — and calls the tool the model picks with
the arguments a strict-mode model sends (every property present, null for those it leaves out).
"""

import json

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from jsonschema import Draft202012Validator
from openai import AsyncOpenAI

from tasks.models import Task
from tests.fake_llm import FakeLLM, Reply, ToolUse

from .live import run

pytestmark = pytest.mark.django_db(transaction=True)

# Traces would be exported to OpenAI's servers, which a test must not reach.
set_tracing_disabled(True)


async def run_agent(url: str, key: str, fake: FakeLLM, prompt: str):
    server = MCPServerStreamableHttp(
        params={"url": f"{url}/mcp", "headers": {"Authorization": f"Bearer {key}"}},
        client_session_timeout_seconds=30,
    )
    async with server:
        model = OpenAIChatCompletionsModel(
            model="fake-model",
            openai_client=AsyncOpenAI(base_url=fake.openai_base_url, api_key="fake", max_retries=0),
        )
        agent = Agent(
            name="sarah",
            instructions="You work here.",
            model=model,
            mcp_servers=[server],
            mcp_config={"convert_schemas_to_strict": True},
        )
        return await Runner.run(agent, prompt, max_turns=4)


def test_every_tool_is_offered_strict_and_a_strict_call_creates_the_task(
    live_url, demo_org, key_of
):
    create = {
        "title": "Speed up the orders query",
        "description": "",
        "required_expertise": "PostgreSQL",
        "urgency": "high",
        "deadline": None,
        "agent_id": None,
        "parent": None,
    }
    with FakeLLM() as fake:
        fake.on(
            contains="Speed up",
            replies=[Reply(tool_calls=[ToolUse("create_task", create)]), Reply("Queued it.")],
        )
        result = run(
            run_agent(live_url, key_of(demo_org, "agent-sarah"), fake, "Speed up the orders query")
        )
        first, second = fake.calls

    assert result.final_output == "Queued it."
    offered = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert "create_task" in offered and "get_organization_roster" in offered
    # The SDK falls back to a non-strict tool when it cannot make a schema strict: none did.
    assert [name for name, f in offered.items() if f.get("strict") is not True] == []

    task = Task.objects.get(title="Speed up the orders query")
    assert task.created_by_agent.handle == "agent-sarah"  # the key's agent, not the body's
    assert (task.urgency, task.required_expertise) == ("high", "PostgreSQL")
    [answer] = second.tool_results
    assert json.loads(answer["content"])["id"] == task.pk


def test_a_refusal_reaches_the_model_as_the_tools_answer(live_url, demo_org, key_of):
    with FakeLLM() as fake:
        fake.on(
            contains="Look at task",
            replies=[
                Reply(tool_calls=[ToolUse("get_task", {"task_id": 987654})]),
                Reply("It does not exist."),
            ],
        )
        result = run(
            run_agent(live_url, key_of(demo_org, "agent-sarah"), fake, "Look at task 987654")
        )
        [answer] = fake.calls[1].tool_results

    assert result.final_output == "It does not exist."
    assert "task_not_found" in answer["content"]


def optional_params(schema: dict, where: str = ""):
    """(path, schema) of every param the registry does not require, nested ones included."""
    required = set(schema.get("required", []))
    for name, sub in schema.get("properties", {}).items():
        if name not in required:
            yield f"{where}{name}", sub
        yield from optional_params(sub, f"{where}{name}.")
        if isinstance(sub.get("items"), dict):
            yield from optional_params(sub["items"], f"{where}{name}[].")


def offered_param(offered: dict, path: str) -> dict:
    node = offered
    for part in path.split("."):
        name, many = part.removesuffix("[]"), part.endswith("[]")
        node = node["properties"][name]
        if many:
            node = node["items"]
    return node


def test_a_strict_model_can_leave_out_every_optional_param(live_url, demo_org, key_of):
    """Strict mode makes the model send every param; it leaves one out by sending null, so the
    schema the SDK offers must accept null for each optional param, an enum's too (the status
    filter of get_my_tasks has no value meaning "any")."""
    from collaboration.models import CollaborationSession
    from organization.registry import REGISTRY

    start = {
        "task": "Plan the Q4 launch",
        "mode": "parallel",
        "synthesis": "coordinator",
        "coordinator_config": None,
        "context": None,
        "max_parallel": None,
        "agent_timeout": None,
        "max_total_tokens": None,
        "max_cost_usd": None,
        "agents": [
            {"agent_id": "agent-alex", "name": None, "role": None, "focus": None, "config": None}
        ],
    }
    with FakeLLM() as fake:
        fake.on(
            contains="Q4 launch",
            replies=[Reply(tool_calls=[ToolUse("start_collaboration", start)]), Reply("Started.")],
        )
        result = run(
            run_agent(live_url, key_of(demo_org, "agent-sarah"), fake, "Plan the Q4 launch")
        )
        first, second = fake.calls

    offered = {t["function"]["name"]: t["function"]["parameters"] for t in first.body["tools"]}
    refused = [
        f"{name}.{path}"
        for name, tool in sorted(REGISTRY.items())
        if name in offered
        for path, sub in optional_params(tool.input_schema)
        if not Draft202012Validator(offered_param(offered[name], path)).is_valid(None)
    ]
    assert refused == []
    # What the model sent is valid under the strict schema it was given, and it works.
    Draft202012Validator(offered["start_collaboration"]).validate(start)
    assert result.final_output == "Started."
    [answer] = second.tool_results
    session = CollaborationSession.objects.get(pk=json.loads(answer["content"])["id"])
    assert session.created_by_agent.handle == "agent-sarah"
