"""MCP prompts: the agent's system prompt and its expert-discovery prompt, as the key allows."""

import asyncio

import pytest
from mcp import MCPError

from organization.discovery.prompt import render_discovery_prompt
from organization.prompt import system_prompt_for

from .live import http_client

pytestmark = pytest.mark.django_db(transaction=True)


async def get(url, key, name, arguments=None):
    async with http_client(url, key, read_timeout_seconds=30) as client:
        listed = (await client.list_prompts()).prompts
        try:
            return listed, await client.get_prompt(name, arguments)
        except MCPError as error:
            return listed, error


def text_of(result) -> str:
    (message,) = result.messages
    assert message.role == "user"
    return message.content.text


def test_an_agent_gets_its_own_prompts(live_url, demo_org, key_of):
    key = key_of(demo_org, "agent-sarah")
    sarah = demo_org.agents.get(handle="agent-sarah")
    listed, system = asyncio.run(get(live_url, key, "system_prompt"))
    assert [p.name for p in listed] == ["system_prompt", "expert_discovery"]
    assert all(not p.arguments for p in listed)
    assert text_of(system).strip() == system_prompt_for(sarah).strip()
    _, discovery = asyncio.run(get(live_url, key, "expert_discovery"))
    assert text_of(discovery) == render_discovery_prompt(sarah)


def test_an_agent_cannot_read_another_agents_prompt(live_url, demo_org, key_of):
    _, error = asyncio.run(
        get(live_url, key_of(demo_org, "agent-sarah"), "system_prompt", {"agent": "agent-alex"})
    )
    assert isinstance(error, MCPError)
    assert error.error.data["code"] == "agent_not_found"
    assert error.error.data["status"] == 404


def test_an_organization_key_names_the_agent(live_url, demo_org, key_of):
    key = key_of(demo_org)
    listed, alex = asyncio.run(get(live_url, key, "system_prompt", {"agent": "agent-alex"}))
    assert [a.name for a in listed[0].arguments] == ["agent"]
    assert "Alex" in text_of(alex)
    _, error = asyncio.run(get(live_url, key, "system_prompt"))
    assert error.error.data["code"] == "agent_required"
    _, unknown = asyncio.run(get(live_url, key, "no_such_prompt", {"agent": "agent-alex"}))
    assert unknown.error.data["code"] == "unknown_prompt"


def test_a_nul_in_a_prompt_argument_is_invalid_like_every_other_door(live_url, demo_org, key_of):
    _, error = asyncio.run(get(live_url, key_of(demo_org), "system_prompt", {"agent": "a\x00b"}))
    assert isinstance(error, MCPError)
    assert error.error.data["code"] == "invalid"
    assert error.error.data["status"] == 400
