"""The start of a collaboration: its params, its REST body, and their one validator, which
returns a StartSpec.
"""

import json
import re
from decimal import Decimal

from django.conf import settings
from rest_framework import serializers
from rest_framework.fields import empty

from costs.budgets import parse_usd
from infrastructure.errors import Conflict, DomainError, Invalid
from organization import registry
from organization.caller import Caller
from organization.models import Organization
from organization.selectors import agent_by_handle
from organization.serializers import JSONObjectField

from ..models import Mode, Synthesis
from ..providers import PROVIDERS
from ..spec import AgentSpec, StartSpec

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,99}$")
TOP_LEVEL_FIELDS = {
    "task",
    "agents",
    "mode",
    "synthesis",
    "coordinator_config",
    "context",
    "max_parallel",
    "agent_timeout",
    "max_total_tokens",
    "max_cost_usd",
}
CONFIG_FIELDS = {"provider", "model", "temperature", "max_tokens", "system_prompt", "providers"}
# An agent's config may give it tools too (issue 11 §3); the coordinator's may not.
AGENT_CONFIG_FIELDS = CONFIG_FIELDS | {"tools"}
ORG_AGENT_FIELDS = {"agent_id", "focus", "role", "config"}
ADHOC_AGENT_FIELDS = {"name", "role", "focus", "config"}
MAX_TASK_CHARS = 100_000
MAX_CONTEXT_BYTES = 100_000
MAX_COMPLETION_TOKENS = 100_000


class SeedProviderSettingsSerializer(serializers.Serializer):
    """A seed-style provider's `config`: the settings taken from it."""

    model = serializers.CharField(required=False, help_text="The provider's model name.")
    temperature = serializers.FloatField(
        required=False, min_value=0, max_value=2, help_text="Sampling temperature, 0 to 2."
    )
    max_tokens = serializers.IntegerField(
        required=False, min_value=1, help_text="Most tokens per answer."
    )


class SeedProviderSerializer(serializers.Serializer):
    """Seed 004's `providers: [{"module": "provider-anthropic", "config": {...}}]`."""

    module = serializers.CharField(
        help_text="The provider's module, e.g. provider-anthropic or provider-openai."
    )
    config = SeedProviderSettingsSerializer(required=False, help_text="Its model settings.")


class LLMConfigSerializer(serializers.Serializer):
    """LLM settings (each optional): provider, model, temperature, max_tokens (or seed 004's
    `providers`)."""

    provider = serializers.ChoiceField(
        choices=PROVIDERS, required=False, help_text="Which LLM provider."
    )
    model = serializers.CharField(required=False, help_text="The provider's model name.")
    temperature = serializers.FloatField(
        required=False, min_value=0, max_value=2, help_text="Sampling temperature, 0 to 2."
    )
    max_tokens = serializers.IntegerField(
        required=False, min_value=1, help_text="Most tokens per answer."
    )
    system_prompt = serializers.CharField(
        required=False, allow_blank=True, help_text="Ad-hoc specialists only."
    )
    providers = SeedProviderSerializer(
        many=True,
        required=False,
        help_text="Seed 004's form of the settings: the first provider's module and config are "
        "read (provider, model, temperature, max_tokens given beside it win).",
    )


class AgentConfigSerializer(LLMConfigSerializer):
    """An agent's LLM settings, and the read-only registry tools it may call."""

    tools = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Read-only registry tools (names, as in GET /api/tools) the agent may call while "
        "it works: as itself for an organization agent, as the session's starter for an ad-hoc "
        "one. A tool that writes answers 400 tool_not_read_only, an unknown one 400 unknown_tool.",
    )


class AgentItemSerializer(serializers.Serializer):
    agent_id = serializers.CharField(
        required=False, help_text="An agent of the organization (its handle), or give `name`."
    )
    name = serializers.CharField(required=False, help_text="An ad-hoc specialist's name.")
    role = serializers.CharField(
        required=False, allow_blank=True, help_text="An ad-hoc specialist's role."
    )
    focus = serializers.CharField(
        required=False, allow_blank=True, help_text="What this agent focuses on."
    )
    config = AgentConfigSerializer(required=False, help_text="The agent's LLM settings and tools.")


class StartCollaborationSerializer(serializers.Serializer):
    """Seed 004's contract plus optional per-session limits (only lower than the server's).
    Without a caller in its context only the fields run (the tool registry's pass); with one, the
    contract is checked on the values as given and `validated_data` is a StartSpec."""

    task = serializers.CharField(help_text="The task for agents to collaborate on")
    agents = AgentItemSerializer(
        many=True,
        help_text="Agents to involve: {agent_id, focus} for an organization agent, or an ad-hoc "
        "specialist {name, role, focus, config}",
    )
    mode = serializers.ChoiceField(
        choices=Mode.choices,
        required=False,
        help_text="How the agents work together. Default: COLLAB_DEFAULT_MODE (parallel).",
    )
    synthesis = serializers.ChoiceField(
        choices=Synthesis.choices,
        required=False,
        help_text="How their answers are combined. Default: COLLAB_DEFAULT_SYNTHESIS "
        "(coordinator).",
    )
    coordinator_config = LLMConfigSerializer(
        required=False, help_text="The coordinator's LLM settings"
    )
    # Free-form by seed 004's contract: the one object here that stays open.
    context = JSONObjectField(
        required=False,
        help_text="Shared context passed to all agents (an object, or it as JSON text)",
    )
    max_parallel = serializers.IntegerField(
        required=False, min_value=1, help_text="At most this many agents at once."
    )
    agent_timeout = serializers.FloatField(required=False, help_text="Seconds per agent.")
    max_total_tokens = serializers.IntegerField(
        required=False, min_value=1, help_text="Token budget of the session."
    )
    max_cost_usd = serializers.DecimalField(
        required=False,
        max_digits=19,
        decimal_places=9,
        min_value=0,
        coerce_to_string=True,
        help_text="A budget of the session's own, in USD: it is refused up front (409 "
        "budget_exhausted) if its estimate does not fit, and no call may cross it.",
    )

    def run_validation(self, data=empty):
        caller = self.context.get("caller")
        if caller is None:
            return super().run_validation(data)
        # REST reads the body as sent (JSON's own types); the tool door's fields ran before.
        return validate_start(data, org=caller.organization)


def validated_start(data, *, caller: Caller) -> StartSpec:
    """A start body (or a tool's validated params) through the serializer, as `caller` starts it."""
    serializer = StartCollaborationSerializer(data=data, context={"caller": caller})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def limit_exceeded(message: str) -> DomainError:
    return Invalid(message, "limit_exceeded")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _optional_text(value, where: str, limit: int = 10_000) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Invalid(f"{where}: must be a string.")
    if len(value) > limit:
        raise Invalid(f"{where}: at most {limit} characters.")
    return value.strip()


def validate_tool_names(value, where: str) -> list[str]:
    """A specialist's tools: names of the registry's read-only tools, each once (unknown → 400
    `unknown_tool`, one that writes → 400 `tool_not_read_only`)."""
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise Invalid(f"{where}: must be a list of tool names.")
    names: list[str] = []
    for i, name in enumerate(value):
        tool = registry.REGISTRY.get(name)
        if tool is None:
            raise Invalid(f"{where}[{i}]: unknown tool {name!r}.", "unknown_tool")
        if not tool.read_only:
            raise Invalid(
                f"{where}[{i}]: {name} writes; a specialist may be given read-only tools only.",
                "tool_not_read_only",
            )
        if name in names:
            raise Invalid(f"{where}[{i}]: {name} is listed twice.")
        names.append(name)
    return names


def validate_llm_config(
    value, where: str, *, allow_system_prompt: bool = True, allow_tools: bool = False
) -> dict:
    """{provider, model, temperature, max_tokens[, system_prompt][, tools]}; seed-style
    `providers` too."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid(f"{where}: must be an object.")
    unknown = sorted(set(value) - (AGENT_CONFIG_FIELDS if allow_tools else CONFIG_FIELDS))
    if unknown:
        raise Invalid(f"{where}.{unknown[0]}: unknown field.")
    config = dict(value)
    providers = config.pop("providers", None)
    if providers is not None:
        # Seed 004 writes `providers: [{"module": "provider-anthropic", "config": {...}}]`.
        if not isinstance(providers, list) or not providers or not isinstance(providers[0], dict):
            raise Invalid(f"{where}.providers: must be a non-empty list of objects.")
        module = str(providers[0].get("module", ""))
        name = next((p for p in PROVIDERS if p in module), None)
        if module and name is None:
            raise Invalid(f"{where}.providers[0].module: unknown provider {module!r}.")
        inner = providers[0].get("config") or {}
        if not isinstance(inner, dict):
            raise Invalid(f"{where}.providers[0].config: must be an object.")
        for key in ("model", "temperature", "max_tokens"):
            if key in inner and key not in config:
                config[key] = inner[key]
        if name and "provider" not in config:
            config["provider"] = name
    clean: dict = {}
    if config.get("provider") is not None:
        if not isinstance(config["provider"], str) or config["provider"] not in PROVIDERS:
            raise Invalid(f"{where}.provider: must be one of {', '.join(PROVIDERS)}.")
        clean["provider"] = config["provider"]
    if config.get("model") is not None:
        model = config["model"]
        if not isinstance(model, str) or not model.strip() or len(model) > 100:
            raise Invalid(f"{where}.model: must be a non-empty string of at most 100 characters.")
        clean["model"] = model.strip()
    if config.get("temperature") is not None:
        temperature = config["temperature"]
        if not _is_number(temperature) or not 0 <= temperature <= 2:
            raise Invalid(f"{where}.temperature: must be a number from 0 to 2.")
        clean["temperature"] = float(temperature)
    if config.get("max_tokens") is not None:
        max_tokens = config["max_tokens"]
        if not _is_int(max_tokens) or not 1 <= max_tokens <= MAX_COMPLETION_TOKENS:
            raise Invalid(
                f"{where}.max_tokens: must be an integer from 1 to {MAX_COMPLETION_TOKENS}."
            )
        clean["max_tokens"] = max_tokens
    if config.get("system_prompt") is not None:
        if not allow_system_prompt:
            raise Invalid(
                f"{where}.system_prompt: an organization agent's prompt is its own "
                "(custom prompt + organizational context)."
            )
        clean["system_prompt"] = _optional_text(
            config["system_prompt"], f"{where}.system_prompt", 20_000
        )
    if config.get("tools") is not None:
        tools = validate_tool_names(config["tools"], f"{where}.tools")
        if tools:
            clean["tools"] = tools
    return clean


def _validate_agent(item, index: int, org: Organization) -> AgentSpec:
    where = f"agents[{index}]"
    if not isinstance(item, dict):
        raise Invalid(f"{where}: must be an object.")
    if "agent_id" in item:
        unknown = sorted(set(item) - ORG_AGENT_FIELDS)
        if unknown:
            raise Invalid(f"{where}.{unknown[0]}: unknown field for an organization agent.")
        handle = item["agent_id"]
        if not isinstance(handle, str) or not handle.strip():
            raise Invalid(f"{where}.agent_id: must be a non-empty string.")
        agent = agent_by_handle(org=org, handle=handle.strip())
        if agent.is_paused:
            raise Conflict(f"{where}: agent {agent.handle} is offline (paused).", "agent_offline")
        return AgentSpec(
            key=agent.handle,
            display_name=agent.name,
            role=_optional_text(item.get("role"), f"{where}.role", 200)
            or agent.role
            or "specialist",
            focus=_optional_text(item.get("focus"), f"{where}.focus"),
            config=validate_llm_config(
                item.get("config"), f"{where}.config", allow_system_prompt=False, allow_tools=True
            ),
            agent=agent,
        )
    unknown = sorted(set(item) - ADHOC_AGENT_FIELDS)
    if unknown:
        raise Invalid(f"{where}.{unknown[0]}: unknown field.")
    name = item.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name.strip()):
        raise Invalid(
            f"{where}.name: required for an ad-hoc specialist (or give agent_id); letters, digits, "
            "spaces, '_', '.', '-', at most 100 characters."
        )
    return AgentSpec(
        key=name.strip(),
        display_name=name.strip(),
        role=_optional_text(item.get("role"), f"{where}.role", 200) or "specialist",
        focus=_optional_text(item.get("focus"), f"{where}.focus"),
        config=validate_llm_config(item.get("config"), f"{where}.config", allow_tools=True),
    )


def _limit(payload: dict, name: str, ceiling, *, integer: bool):
    if payload.get(name) is None:
        return ceiling
    value = payload[name]
    if integer and not _is_int(value) or not integer and not _is_number(value):
        raise Invalid(f"{name}: must be {'an integer' if integer else 'a number'}.")
    if value <= 0:
        raise Invalid(f"{name}: must be positive.")
    if value > ceiling:
        raise limit_exceeded(
            f"{name}: {value} is above this server's limit of {ceiling}; a session may only lower it."
        )
    return value


def validate_start(payload, *, org: Organization) -> StartSpec:
    """Seed 004's contract, with our limits; raises Invalid/NotFound/Conflict naming the field."""
    if not isinstance(payload, dict):
        raise Invalid("The body must be a JSON object.")
    unknown = sorted(set(payload) - TOP_LEVEL_FIELDS)
    if unknown:
        raise Invalid(f"{unknown[0]}: unknown field.")
    task = payload.get("task")
    if not isinstance(task, str) or not task.strip():
        raise Invalid("task: required, a non-empty string.")
    if len(task) > MAX_TASK_CHARS:
        raise Invalid(f"task: at most {MAX_TASK_CHARS} characters.")
    mode = payload.get("mode") or settings.COLLAB_DEFAULT_MODE
    if mode not in Mode.values:
        raise Invalid(f"mode: must be one of {', '.join(Mode.values)}.")
    synthesis = payload.get("synthesis") or settings.COLLAB_DEFAULT_SYNTHESIS
    if synthesis not in Synthesis.values:
        raise Invalid(f"synthesis: must be one of {', '.join(Synthesis.values)}.")
    agents = payload.get("agents")
    if not isinstance(agents, list) or not agents:
        raise Invalid("agents: required, a non-empty list.")
    if len(agents) > settings.COLLAB_MAX_AGENTS:
        raise limit_exceeded(
            f"agents: {len(agents)} agents is above this server's limit of "
            f"{settings.COLLAB_MAX_AGENTS}."
        )
    specs = [_validate_agent(item, i, org) for i, item in enumerate(agents)]
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        if spec.key in seen:
            raise Invalid(f"agents[{i}]: {spec.key} appears twice in this session.")
        seen.add(spec.key)
    if mode == Mode.HIERARCHICAL and len(specs) < 2:
        raise Invalid("agents: hierarchical mode needs a coordinator and at least one specialist.")
    if mode == Mode.HIERARCHICAL and specs[0].config.get("tools"):
        raise Invalid(
            "agents[0].config.tools: the hierarchical coordinator writes its plan without tools; "
            "give them to the specialists."
        )
    context = payload.get("context")
    if context is None:
        context = {}
    if isinstance(context, str):
        context = _context_from_text(context)
    if not isinstance(context, dict):
        raise Invalid("context: must be an object.")
    if len(json.dumps(context, default=str)) > MAX_CONTEXT_BYTES:
        raise Invalid(f"context: at most {MAX_CONTEXT_BYTES} bytes of JSON.")
    return StartSpec(
        task=task.strip(),
        agents=specs,
        mode=mode,
        synthesis=synthesis,
        coordinator_config=validate_llm_config(
            payload.get("coordinator_config"), "coordinator_config"
        ),
        context=context,
        max_parallel=_limit(payload, "max_parallel", settings.COLLAB_MAX_PARALLEL, integer=True),
        agent_timeout=float(
            _limit(payload, "agent_timeout", settings.COLLAB_AGENT_TIMEOUT, integer=False)
        ),
        max_total_tokens=_limit(
            payload, "max_total_tokens", settings.COLLAB_MAX_TOTAL_TOKENS, integer=True
        ),
        max_cost_usd=_max_cost(payload.get("max_cost_usd")),
    )


def _context_from_text(text: str) -> dict:
    """`context` given as JSON text (the schema offers it so, for OpenAI's strict mode): the
    object it holds, under the same guard as a body's (NUL, depth, range)."""
    field = JSONObjectField()
    field.field_name = "context"
    try:
        return field.to_internal_value(text)
    except serializers.ValidationError as exc:
        detail = exc.detail[0] if isinstance(exc.detail, list) else exc.detail
        message = str(detail)
        raise Invalid(message if message.startswith("context") else f"context: {message}") from None


def _max_cost(value) -> Decimal | None:
    return None if value is None else parse_usd(value, "max_cost_usd")
