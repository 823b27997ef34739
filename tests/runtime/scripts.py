"""Short forms of the model conversations the runtime tests script: which provider an agent's
runs call, and what its model answers, turn by turn."""

from collections.abc import Callable

from django.db import connection

from organization.models import Agent
from tests.fake_llm import FakeLLM, Reply, Script, ToolUse


def managed_by(agent: Agent, provider: str = "openai", model: str = "m-1", **fields) -> None:
    """`agent`'s runs call `provider`'s API (the fake server) for `model`."""
    Agent.objects.filter(pk=agent.pk).update(llm_provider=provider, llm_model=model, **fields)


def calling(*uses: ToolUse, **reply) -> Reply:
    """One model turn that makes these tool calls."""
    return Reply(tool_calls=list(uses), **reply)


def call(name: str, **arguments) -> Reply:
    """One model turn that makes the one tool call `name(**arguments)`."""
    return calling(ToolUse(name, arguments))


def script(fake: FakeLLM, agent: Agent | str, *turns: Reply | str) -> Script:
    """`agent`'s (or the handle's) model replies `turns` in order; a string is a final answer."""
    replies = [Reply(turn) if isinstance(turn, str) else turn for turn in turns]
    handle = agent if isinstance(agent, str) else agent.handle
    return fake.on(agent=handle, replies=replies)


def looks_while(fake: FakeLLM, agent: Agent, meanwhile: Callable[[], object]) -> None:
    """`agent`'s model says "Looking." and asks for the roster, and answers "Indexed." after it;
    `meanwhile` runs as the model asks (someone else's act while the run is under way)."""

    def asks(_call):
        meanwhile()
        connection.close()  # this is the fake server's thread
        return [ToolUse("get_organization_roster", {"filter": "all"})]

    script(fake, agent, Reply("Looking.", tool_calls=asks), "Indexed.")
