"""Writes of the collaboration app: start a session, cancel it (the events are in events.py).

Every door (REST, the tool registry, the admin form) starts a session through `session_create`,
which validates the seed-004 contract in one place and queues the run on a Celery worker.
"""

import json
import math
import re
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework import serializers

from costs.budgets import check_fits, parse_usd
from costs.models import LIFETIME, Budget, BudgetScope
from infrastructure import outbox
from infrastructure.errors import Conflict, DomainError, Forbidden, Invalid, RateLimited
from organization import registry
from organization.caller import Caller
from organization.models import Organization
from organization.selectors import agent_by_handle
from organization.serializers import JSONObjectField

from . import events
from .estimate import estimate
from .models import (
    COORDINATOR_ROLE,
    CollaborationSession,
    Contribution,
    Mode,
    SessionStatus,
    Synthesis,
)
from .providers import PROVIDERS
from .runner.finish import session_finish_cancelled
from .tasks import run_collaboration as _run_collaboration_task

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
START_WINDOW = timedelta(hours=1)


def limit_exceeded(message: str) -> DomainError:
    return Invalid(message, "limit_exceeded")


@dataclass
class AgentSpec:
    key: str
    display_name: str
    role: str
    focus: str
    config: dict
    agent: object = None  # organization.models.Agent for an org agent


@dataclass
class StartSpec:
    task: str
    agents: list[AgentSpec]
    mode: str
    synthesis: str
    coordinator_config: dict
    context: dict
    max_parallel: int
    agent_timeout: float
    max_total_tokens: int
    # A lifetime budget of the session's own (issue 12 §2), in USD; None: only the others apply.
    max_cost_usd: Decimal | None = None
    extra: dict = field(default_factory=dict)


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
    """A specialist's tools: names of the registry's read-only tools, each once.

    Unknown → 400 `unknown_tool`; a tool that writes → 400 `tool_not_read_only` (a specialist
    analyses, it does not act; the managed runtime is where agents act)."""
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


def session_estimate(*, caller: Caller, payload) -> dict:
    """`POST /api/collaborations/estimate`: the same body, validated the same way; nothing starts."""
    spec = validate_start(payload, org=caller.organization)
    check_tool_grants(caller, spec)
    return estimate(
        spec, caller.organization, starter_agent_id=caller.agent_id,
        max_cost_usd=spec.max_cost_usd, viewer=caller.agent,
    )  # fmt: skip


def check_start_rate(org: Organization) -> None:
    """COLLAB_MAX_STARTS_PER_HOUR sessions per organization in any hour, counted from the
    sessions themselves; the caller holds the organization's row lock, so concurrent starts
    cannot both take the last place."""
    limit = settings.COLLAB_MAX_STARTS_PER_HOUR
    now = timezone.now()
    recent = list(
        CollaborationSession.objects.filter(organization=org, created_at__gt=now - START_WINDOW)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:limit]
    )
    if len(recent) < limit:
        return
    # A place frees when the limit-th newest start leaves the window.
    wait = (recent[-1] + START_WINDOW - now).total_seconds()
    raise RateLimited(
        f"This organization started {limit} collaborations in the last hour, its limit; "
        f"try again in {math.ceil(wait)} s.",
        retry_after=max(1, math.ceil(wait)),
    )


def check_tool_grants(caller: Caller, spec: StartSpec) -> None:
    """403 `tools_forbidden` when an agent gives a colleague tools.

    An organization agent's tools run as that agent, and the starter reads its answer and every
    tool result: what the colleague sees (its tasks, its private prompt) is not the starter's
    to read. So, as with its custom prompt, only a human of the organization or that agent
    itself may give it tools; an ad-hoc specialist's run as the starter, so any starter may."""
    if caller.agent is None:
        return
    for i, agent in enumerate(spec.agents):
        if agent.agent is not None and agent.config.get("tools") and agent.agent != caller.agent:
            raise Forbidden(
                f"agents[{i}].config.tools: {agent.key}'s tools would run as {agent.key} and show "
                "you what it sees; only a human of the organization or that agent may give them.",
                "tools_forbidden",
            )


@transaction.atomic
def session_create(*, caller: Caller, payload) -> CollaborationSession:
    """Validate, store the session with one pending Contribution per agent, queue it on a worker."""
    spec = validate_start(payload, org=caller.organization)
    check_tool_grants(caller, spec)
    Organization.objects.select_for_update().filter(pk=caller.organization.pk).first()
    check_start_rate(caller.organization)
    check_fits(
        estimate(
            spec,
            caller.organization,
            starter_agent_id=caller.agent_id,
            max_cost_usd=spec.max_cost_usd,
            viewer=caller.agent,
        )
    )
    session = CollaborationSession.objects.create(
        organization=caller.organization,
        created_by_agent=caller.agent,
        created_by_user=caller.user if caller.user is not None and caller.agent is None else None,
        created_by=caller.label,
        dispatched_at=timezone.now(),
        task=spec.task,
        mode=spec.mode,
        synthesis=spec.synthesis,
        coordinator_config=spec.coordinator_config,
        context=spec.context,
        max_parallel=spec.max_parallel,
        agent_timeout=spec.agent_timeout,
        max_total_tokens=spec.max_total_tokens,
    )
    Contribution.objects.bulk_create(
        Contribution(
            session=session,
            position=i,
            agent_key=a.key,
            agent=a.agent,
            display_name=a.display_name,
            role=COORDINATOR_ROLE if spec.mode == Mode.HIERARCHICAL and i == 0 else a.role,
            focus=a.focus,
            config=a.config,
        )
        for i, a in enumerate(spec.agents)
    )
    if spec.max_cost_usd is not None:
        Budget.objects.create(
            organization=caller.organization, scope=BudgetScope.COLLABORATION, session=session,
            limit_usd=spec.max_cost_usd, period=LIFETIME, created_by=caller.label,
        )  # fmt: skip
    events.session_queued_event(
        session.id, agents=[a.key for a in spec.agents], mode=spec.mode, synthesis=spec.synthesis
    )
    # Through the outbox: the session is accepted (202) even while the broker is away.
    outbox.enqueue(_run_collaboration_task.name, str(session.id))
    return session


def can_manage(caller: Caller, session: CollaborationSession) -> bool:
    """Humans of the organization, or the agent that started the session."""
    return caller.is_human or session.created_by_agent_id == caller.agent.pk


@transaction.atomic
def session_cancel(*, caller: Caller, session: CollaborationSession) -> CollaborationSession:
    """Stop pending work: a queued session ends now, a running one at its runner's next check."""
    if not can_manage(caller, session):
        raise Forbidden(
            "Only the agent that started a session, or a human of the organization, may cancel it.",
            "forbidden",
        )
    session = CollaborationSession.objects.select_for_update().get(pk=session.pk)
    if session.is_finished:
        raise Conflict(f"The session is already {session.status}.", "session_finished")
    if not session.cancel_requested:
        session.cancel_requested = True
        session.save(update_fields=["cancel_requested"])
        events.cancel_requested_event(session.id, by=caller.label)
    if session.status == SessionStatus.QUEUED:
        session_finish_cancelled(session)
    return session
