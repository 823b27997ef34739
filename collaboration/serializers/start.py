"""The start of a collaboration: one serializer checks its body at every door (REST, call-tool,
MCP) and gives the services a StartSpec."""

import json
import re
from collections.abc import Mapping

from django.conf import settings
from rest_framework import serializers

from costs.budgets import parse_usd
from infrastructure.errors import Conflict, DomainError, Invalid, first_error
from organization import registry
from organization.caller import Caller
from organization.selectors import agent_by_handle
from organization.serializers import JSONObjectField

from ..models import Mode, Synthesis
from ..providers import PROVIDERS
from ..spec import AgentSpec, StartSpec

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,99}$")
NAME_RULE = (
    "required for an ad-hoc specialist (or give agent_id); letters, digits, spaces, '_', '.', "
    "'-', at most 100 characters."
)
ORG_AGENT_FIELDS = {"agent_id", "focus", "role", "config"}
MAX_TASK_CHARS = 100_000
MAX_CONTEXT_BYTES = 100_000
MAX_COMPLETION_TOKENS = 100_000


def _messages(message: str, *codes: str) -> dict:
    return dict.fromkeys(("invalid", "blank", "null", *codes), message)


class StrictCharField(serializers.CharField):
    """Text as JSON gives it: a number is not a string."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """An integer as JSON Schema reads one (2 or 2.0), never "2" or true."""

    def to_internal_value(self, data):
        whole = isinstance(data, int) or isinstance(data, float) and data.is_integer()
        if isinstance(data, bool) or not whole:
            self.fail("invalid")
        return int(data)


class StrictFloatField(serializers.FloatField):
    """A JSON number, never "1.5" or true."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return float(data)


class UsdField(serializers.DecimalField):
    """An amount of USD read as budgets read one: rounded to the ledger's 9 places."""

    def to_internal_value(self, data):
        return parse_usd(data, self.field_name)


class JSONBodySerializer(serializers.Serializer):
    """A JSON object with no field beyond the declared ones; a null is a field not given."""

    unknown_fields_allowed = False

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown and not self.unknown_fields_allowed:
                raise serializers.ValidationError({unknown[0]: ["unknown field."]})
            data = {key: value for key, value in data.items() if value is not None}
        return super().to_internal_value(data)


def at_most(limit: int, message: str):
    """A bound checked without appearing in the published schemas, which stay as they are."""

    def check(value):
        if (len(value) if isinstance(value, str) else value) > limit:
            raise serializers.ValidationError(message)

    return check


def model_field(**kwargs) -> StrictCharField:
    message = "must be a non-empty string of at most 100 characters."
    return StrictCharField(
        error_messages=_messages(message),
        validators=[at_most(100, message)],
        help_text="The provider's model name.",
        **kwargs,
    )


def temperature_field(**kwargs) -> StrictFloatField:
    return StrictFloatField(
        min_value=0,
        max_value=2,
        error_messages=_messages("must be a number from 0 to 2.", "min_value", "max_value"),
        help_text="Sampling temperature, 0 to 2.",
        **kwargs,
    )


def max_tokens_field(**kwargs) -> StrictIntegerField:
    message = f"must be an integer from 1 to {MAX_COMPLETION_TOKENS}."
    return StrictIntegerField(
        min_value=1,
        error_messages=_messages(message, "min_value"),
        validators=[at_most(MAX_COMPLETION_TOKENS, message)],
        help_text="Most tokens per answer.",
        **kwargs,
    )


def optional_text(limit: int, help_text: str) -> StrictCharField:
    return StrictCharField(
        required=False,
        allow_blank=True,
        error_messages={"invalid": "must be a string."},
        validators=[at_most(limit, f"at most {limit} characters.")],
        help_text=help_text,
    )


def session_limit(help_text: str) -> StrictIntegerField:
    """A count the session may lower below the server's limit, never raise."""
    return StrictIntegerField(
        required=False,
        min_value=1,
        error_messages={"invalid": "must be an integer.", "min_value": "must be positive."},
        help_text=help_text,
    )


class SeedProviderSettingsSerializer(JSONBodySerializer):
    """A seed-style provider's `config`: the settings taken from it (others are ignored)."""

    unknown_fields_allowed = True

    model = model_field(required=False)
    temperature = temperature_field(required=False)
    max_tokens = max_tokens_field(required=False)


class SeedProviderSerializer(JSONBodySerializer):
    """Seed 004's `providers: [{"module": "provider-anthropic", "config": {...}}]`."""

    unknown_fields_allowed = True

    module = serializers.CharField(
        help_text="The provider's module, e.g. provider-anthropic or provider-openai.",
    )
    config = SeedProviderSettingsSerializer(
        required=False,
        error_messages={"invalid": "must be an object."},
        help_text="Its model settings.",
    )

    def validate_module(self, module: str) -> str:
        if module and not any(name in module for name in PROVIDERS):
            raise serializers.ValidationError(f"unknown provider {module!r}.")
        return module


class LLMConfigSerializer(JSONBodySerializer):
    """LLM settings (each optional): provider, model, temperature, max_tokens (or seed 004's
    `providers`)."""

    provider = serializers.ChoiceField(
        choices=PROVIDERS,
        required=False,
        error_messages=_messages(f"must be one of {', '.join(PROVIDERS)}.", "invalid_choice"),
        help_text="Which LLM provider.",
    )
    model = model_field(required=False)
    temperature = temperature_field(required=False)
    max_tokens = max_tokens_field(required=False)
    system_prompt = optional_text(20_000, "Ad-hoc specialists only.")
    providers = SeedProviderSerializer(
        many=True,
        required=False,
        allow_empty=False,
        error_messages={
            **dict.fromkeys(("not_a_list", "empty"), "must be a non-empty list of objects."),
            "invalid": "must be an object.",
        },
        help_text="Seed 004's form of the settings: the first provider's module and config are "
        "read (provider, model, temperature, max_tokens given beside it win).",
    )

    def validate(self, attrs: dict) -> dict:
        """The first seed-style provider fills what the config does not give itself."""
        providers = attrs.pop("providers", None)
        if providers:
            first = providers[0]
            for key, value in first.get("config", {}).items():
                attrs.setdefault(key, value)
            module = first.get("module", "")
            name = next((name for name in PROVIDERS if name in module), None)
            if name:
                attrs.setdefault("provider", name)
        return dict(attrs)


class AgentConfigSerializer(LLMConfigSerializer):
    """An agent's LLM settings, and the read-only registry tools it may call."""

    tools = serializers.ListField(
        child=StrictCharField(error_messages={"invalid": "must be a list of tool names."}),
        required=False,
        error_messages={"not_a_list": "must be a list of tool names."},
        help_text="Read-only registry tools (names, as in GET /api/tools) the agent may call while "
        "it works: as itself for an organization agent, as the session's starter for an ad-hoc "
        "one. A tool that writes answers 400 tool_not_read_only, an unknown one 400 unknown_tool.",
    )

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        if not attrs.get("tools"):
            attrs.pop("tools", None)
        return attrs


class AgentItemSerializer(JSONBodySerializer):
    """An agent of the organization (`agent_id`) or an ad-hoc specialist (`name`)."""

    agent_id = StrictCharField(
        required=False,
        error_messages=_messages("must be a non-empty string."),
        help_text="An agent of the organization (its handle), or give `name`.",
    )
    name = StrictCharField(
        required=False,
        error_messages=_messages(NAME_RULE),
        help_text="An ad-hoc specialist's name.",
    )
    role = optional_text(200, "An ad-hoc specialist's role.")
    focus = optional_text(10_000, "What this agent focuses on.")
    config = AgentConfigSerializer(
        required=False,
        error_messages={"invalid": "must be an object."},
        help_text="The agent's LLM settings and tools.",
    )

    def to_internal_value(self, data):
        if isinstance(data, Mapping) and "agent_id" in data:
            unknown = sorted(set(data) - ORG_AGENT_FIELDS)
            if unknown:
                message = "unknown field for an organization agent."
                raise serializers.ValidationError({unknown[0]: [message]})
        return super().to_internal_value(data)

    def validate(self, attrs: dict) -> dict:
        if "agent_id" in attrs:
            if "system_prompt" in attrs.get("config", {}):
                message = (
                    "an organization agent's prompt is its own (custom prompt + organizational "
                    "context)."
                )
                raise serializers.ValidationError({"config": {"system_prompt": [message]}})
        elif not NAME_RE.match(attrs.get("name", "")):
            raise serializers.ValidationError({"name": [NAME_RULE]})
        return attrs


class StartCollaborationSerializer(JSONBodySerializer):
    """Seed 004's contract plus optional per-session limits (only lower than the server's), as
    the caller in its context starts it: `validated_data` holds a StartSpec's fields."""

    default_error_messages = {"invalid": "The body must be a JSON object."}

    task = StrictCharField(
        error_messages=_messages("required, a non-empty string.", "required"),
        validators=[at_most(MAX_TASK_CHARS, f"at most {MAX_TASK_CHARS} characters.")],
        help_text="The task for agents to collaborate on",
    )
    agents = AgentItemSerializer(
        many=True,
        allow_empty=False,
        error_messages={
            **dict.fromkeys(
                ("required", "null", "not_a_list", "empty"), "required, a non-empty list."
            ),
            "invalid": "must be an object.",
        },
        help_text="Agents to involve: {agent_id, focus} for an organization agent, or an ad-hoc "
        "specialist {name, role, focus, config}",
    )
    mode = serializers.ChoiceField(
        choices=Mode.choices,
        required=False,
        error_messages=_messages(f"must be one of {', '.join(Mode.values)}.", "invalid_choice"),
        help_text="How the agents work together. Default: COLLAB_DEFAULT_MODE (parallel).",
    )
    synthesis = serializers.ChoiceField(
        choices=Synthesis.choices,
        required=False,
        error_messages=_messages(
            f"must be one of {', '.join(Synthesis.values)}.", "invalid_choice"
        ),
        help_text="How their answers are combined. Default: COLLAB_DEFAULT_SYNTHESIS "
        "(coordinator).",
    )
    coordinator_config = LLMConfigSerializer(
        required=False,
        error_messages={"invalid": "must be an object."},
        help_text="The coordinator's LLM settings",
    )
    # Free-form by seed 004's contract: the one object here that stays open.
    context = JSONObjectField(
        required=False,
        help_text="Shared context passed to all agents (an object, or it as JSON text)",
    )
    max_parallel = session_limit("At most this many agents at once.")
    agent_timeout = StrictFloatField(
        required=False,
        error_messages={"invalid": "must be a number."},
        help_text="Seconds per agent.",
    )
    max_total_tokens = session_limit("Token budget of the session.")
    max_cost_usd = UsdField(
        required=False,
        max_digits=19,
        decimal_places=9,
        min_value=0,
        coerce_to_string=True,
        help_text="A budget of the session's own, in USD: it is refused up front (409 "
        "budget_exhausted) if its estimate does not fit, and no call may cross it.",
    )

    def to_internal_value(self, data):
        # Counted before any agent is read: the server's limit bounds the work.
        if isinstance(data, Mapping) and isinstance(data.get("agents"), list):
            count, ceiling = len(data["agents"]), settings.COLLAB_MAX_AGENTS
            if count > ceiling:
                raise limit_exceeded(
                    f"agents: {count} agents is above this server's limit of {ceiling}."
                )
        return super().to_internal_value(data)

    def validate_agent_timeout(self, value: float) -> float:
        if value <= 0:
            raise serializers.ValidationError("must be positive.")
        return value

    def validate_context(self, context: dict) -> dict:
        if len(json.dumps(context, default=str)) > MAX_CONTEXT_BYTES:
            raise serializers.ValidationError(f"at most {MAX_CONTEXT_BYTES} bytes of JSON.")
        return context

    def validate(self, attrs: dict) -> dict:
        """The rules across fields and against the organization: who the agents are, what the
        mode needs, the tools they may have, the server's limits."""
        organization = self.context["caller"].organization
        mode = attrs.get("mode") or settings.COLLAB_DEFAULT_MODE
        agents = [_agent_spec(item, i, organization) for i, item in enumerate(attrs["agents"])]
        _check_distinct(agents)
        if mode == Mode.HIERARCHICAL and len(agents) < 2:
            raise Invalid(
                "agents: hierarchical mode needs a coordinator and at least one specialist."
            )
        if mode == Mode.HIERARCHICAL and agents[0].config.get("tools"):
            raise Invalid(
                "agents[0].config.tools: the hierarchical coordinator writes its plan without "
                "tools; give them to the specialists."
            )
        for i, agent in enumerate(agents):
            _check_tools(agent.config.get("tools", []), f"agents[{i}].config.tools")
        return {
            "task": attrs["task"],
            "agents": agents,
            "mode": mode,
            "synthesis": attrs.get("synthesis") or settings.COLLAB_DEFAULT_SYNTHESIS,
            "coordinator_config": attrs.get("coordinator_config", {}),
            "context": attrs.get("context", {}),
            "max_parallel": _within(attrs, "max_parallel", settings.COLLAB_MAX_PARALLEL),
            "agent_timeout": float(_within(attrs, "agent_timeout", settings.COLLAB_AGENT_TIMEOUT)),
            "max_total_tokens": _within(
                attrs, "max_total_tokens", settings.COLLAB_MAX_TOTAL_TOKENS
            ),
            "max_cost_usd": attrs.get("max_cost_usd"),
        }


def validated_start(data, *, caller: Caller) -> StartSpec:
    """A start body through the serializer, as `caller` starts it; 400 naming the field."""
    serializer = StartCollaborationSerializer(data=data, context={"caller": caller})
    if not serializer.is_valid():
        raise Invalid(first_message(serializer.errors))
    return StartSpec(**serializer.validated_data)


def first_message(detail) -> str:
    """The first error of a nested detail as "agents[1].config.temperature: …" (the registry's
    path, its list indexes in brackets)."""
    where, message = first_error(detail)
    where = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", where)
    if not where or message.startswith((f"{where}.", f"{where}[", f"{where}:")):
        return message  # a message that names its own place (the JSON guard's) keeps it
    return f"{where}: {message}"


def limit_exceeded(message: str) -> DomainError:
    return Invalid(message, "limit_exceeded")


def _agent_spec(item: dict, index: int, organization) -> AgentSpec:
    if "agent_id" not in item:
        return AgentSpec(
            key=item["name"],
            display_name=item["name"],
            role=item.get("role") or "specialist",
            focus=item.get("focus", ""),
            config=item.get("config", {}),
        )
    agent = agent_by_handle(org=organization, handle=item["agent_id"])
    if agent.is_paused:
        raise Conflict(
            f"agents[{index}]: agent {agent.handle} is offline (paused).", "agent_offline"
        )
    return AgentSpec(
        key=agent.handle,
        display_name=agent.name,
        role=item.get("role") or agent.role or "specialist",
        focus=item.get("focus", ""),
        config=item.get("config", {}),
        agent=agent,
    )


def _check_distinct(agents: list[AgentSpec]) -> None:
    seen: set[str] = set()
    for i, agent in enumerate(agents):
        if agent.key in seen:
            raise Invalid(f"agents[{i}]: {agent.key} appears twice in this session.")
        seen.add(agent.key)


def _check_tools(names: list[str], where: str) -> None:
    """A specialist's tools: the registry's read-only tools, each once (unknown → 400
    `unknown_tool`, one that writes → 400 `tool_not_read_only`)."""
    for i, name in enumerate(names):
        tool = registry.REGISTRY.get(name)
        if tool is None:
            raise Invalid(f"{where}[{i}]: unknown tool {name!r}.", "unknown_tool")
        if not tool.read_only:
            raise Invalid(
                f"{where}[{i}]: {name} writes; a specialist may be given read-only tools only.",
                "tool_not_read_only",
            )
        if name in names[:i]:
            raise Invalid(f"{where}[{i}]: {name} is listed twice.")


def _within(attrs: dict, name: str, ceiling):
    """A session's own limit, or the server's when it gives none; it may only lower it."""
    value = attrs.get(name)
    if value is None:
        return ceiling
    if value > ceiling:
        raise limit_exceeded(
            f"{name}: {value} is above this server's limit of {ceiling}; a session may only "
            "lower it."
        )
    return value
