"""The tool registry: one source of truth for REST call-tool, `GET /api/tools` and MCP.

A tool is a name, a description, the serializer that validates the same input at the REST door
(its JSON Schema is the tool's `inputSchema`) and a handler; each app registers its `tools.py`.
"""

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from rest_framework import serializers

from infrastructure import tracing
from infrastructure.errors import (
    DomainError,
    Forbidden,
    Invalid,
    NotFound,
    first_error,
    tell_refused,
)
from infrastructure.inputs import check_input

from .caller import Caller
from .history import acting_as
from .schema import input_schema_of


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict
    handler: Callable[[Caller, dict], Any]
    # Read-only tools are the only ones organization keys may list and call (issue 5).
    read_only: bool = True
    needs_agent: bool = True
    title: str = ""
    # MCP's hints for a tool that writes: it may destroy or overwrite what was there, and
    # calling it again with the same params has no further effect.
    destructive: bool = False
    idempotent: bool = False
    # The serializer that validates the params (None only for a tool given a bare JSON Schema).
    validator: type[serializers.Serializer] | None = None
    # What the params' JSON Schema check accepts, where it is wider than `input_schema`: a
    # free-form object offered as JSON text is taken as an object too (JSONObjectField).
    accepted_schema: dict | None = None
    # A managed run stops at a successful call of it (its model is told to end its turn too):
    # the agent waits for what the call asked for, and is woken by it (ask_human).
    ends_turn: bool = False

    def annotations(self) -> dict:
        """MCP tool annotations (served as they are over MCP and on GET /api/tools)."""
        hints = {"title": self.title, "readOnlyHint": self.read_only, "openWorldHint": False}
        if not self.read_only:
            # Explicit, because MCP's default destructiveHint is true for a tool that writes.
            hints.update(destructiveHint=self.destructive, idempotentHint=self.idempotent)
        return hints

    @functools.cached_property
    def offered_schema(self) -> dict:
        """The params' JSON Schema as served (GET /api/tools, MCP): `input_schema` with null
        also accepted for every param a call may leave out (`offered`)."""
        return offered(self.input_schema)

    @functools.cached_property
    def schema_validator(self) -> Draft202012Validator:
        """The JSON Schema check of the params, built once per tool (the schema never changes)."""
        return Draft202012Validator(self.accepted_schema or self.input_schema)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.offered_schema,
            "readOnly": self.read_only,
            "annotations": self.annotations(),
        }


REGISTRY: dict[str, Tool] = {}

# Checks every call meets before its handler runs, each `(caller, tool, params)` (the params as
# sent, validated already): an app above
# registers one (tasks' approval gate) and raises to stop the call (docs/decisions.md).
GATES: list[Callable[[Caller, Tool, dict], None]] = []


def register_gate(gate: Callable[[Caller, Tool, dict], None]) -> None:
    if gate not in GATES:
        GATES.append(gate)


def register_tool(
    name: str,
    description: str,
    validator: type[serializers.Serializer] | dict | None = None,
    *,
    read_only: bool,
    needs_agent: bool = True,
    title: str | None = None,
    destructive: bool = False,
    idempotent: bool = False,
    ends_turn: bool = False,
):
    """Decorator: `@register_tool("get_organization_roster", "…", RosterQuerySerializer, read_only=True)`.

    `read_only` has no default on purpose: a new tool must say whether it writes rather than
    inherit access by omission (organization keys may call exactly the read-only tools).
    """
    if isinstance(validator, type) and issubclass(validator, serializers.Serializer):
        schema, serializer = input_schema_of(validator), validator
        accepted = input_schema_of(validator, json_text=False)
    else:
        schema, serializer, accepted = dict(validator or {}), None, None
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    schema.setdefault("additionalProperties", False)
    Draft202012Validator.check_schema(schema)
    title = title or name.replace("_", " ").capitalize()

    def decorator(handler):
        REGISTRY[name] = Tool(
            name,
            description,
            schema,
            handler,
            read_only,
            needs_agent,
            title,
            destructive,
            idempotent,
            serializer,
            accepted if accepted != schema else None,
            ends_turn,
        )
        return handler

    return decorator


# --- who may use which tool: one rule for every door (REST call-tool, GET /api/tools, MCP) ---


def is_organization_key(caller: Caller) -> bool:
    """An organization key: a key that acts as no agent (not an admin member's session)."""
    return caller.agent is None and caller.api_key is not None


def may_use(caller: Caller | None, tool: Tool) -> bool:
    """Whether `caller` sees and may call `tool`: an agent key every tool, an organization key
    the read-only ones, an admin member (session) those and the ones that act as no agent.
    """
    if caller is None or caller.agent is not None or tool.read_only:
        return True
    if is_organization_key(caller):
        return False
    return not tool.needs_agent


def check_access(caller: Caller, tool: Tool) -> None:
    """403 for a tool `caller` may not call: `agent_required` when the tool acts as an agent,
    `read_only_key` when an organization key calls a tool that writes."""
    if may_use(caller, tool):
        return
    if tool.needs_agent:
        caller.require_agent()
    raise Forbidden(
        f"Organization keys may call read-only tools only, and '{tool.name}' writes: "
        "use an agent key.",
        "read_only_key",
    )


def tools_for(caller: Caller | None = None) -> list[Tool]:
    """The tools `caller` may use, sorted by name (all of them for None)."""
    return [t for t in sorted(REGISTRY.values(), key=lambda t: t.name) if may_use(caller, t)]


IDENTITY_FIELDS = ("agentId", "organizationId")


def check_identity(caller: Caller, *sources: dict) -> None:
    """The seed's injected agentId/organizationId come from the key; a body naming others is refused."""
    for source in sources:
        if not isinstance(source, dict):
            continue
        agent_id = source.get("agentId")
        if agent_id is not None and (caller.agent is None or str(agent_id) != caller.agent.handle):
            raise Forbidden(
                "agentId in the request does not match the API key's agent.", "identity_mismatch"
            )
        org_id = source.get("organizationId")
        if org_id is not None and str(org_id) not in (
            caller.organization.slug,
            str(caller.organization.pk),
        ):
            raise Forbidden(
                "organizationId in the request does not match the API key's organization.",
                "identity_mismatch",
            )


def allows_null(schema: dict) -> bool:
    """Whether `schema` itself accepts null (a param where null means something, e.g. "clear")."""
    types = schema.get("type")
    if types is None and not any(k in schema for k in ("enum", "const", "anyOf", "oneOf")):
        return True
    if types == "null" or (isinstance(types, list) and "null" in types):
        return True
    if None in schema.get("enum", ()):
        return True
    return any(allows_null(s) for s in schema.get("anyOf", []) + schema.get("oneOf", []))


def offered(schema: dict) -> dict:
    """`schema` with null also accepted for each optional param, nested ones included: OpenAI's
    strict mode makes the model send every param, and null is how it leaves one out.
    """
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if isinstance(schema.get("items"), dict):
        out["items"] = offered(schema["items"])
    properties = schema.get("properties")
    if isinstance(properties, dict):
        required = set(schema.get("required", []))
        out["properties"] = {
            name: offered(sub) if name in required else _nullable(offered(sub))
            for name, sub in properties.items()
        }
    return out


def _nullable(schema: dict) -> dict:
    if allows_null(schema) or "const" in schema:
        return schema
    if "enum" in schema:
        schema = {**schema, "enum": [*schema["enum"], None]}
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list):
        return {**schema, "type": [*kind, "null"]}
    if isinstance(schema.get("anyOf"), list):
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return schema


def without_nulls(schema: dict, value: Any) -> Any:
    """`value` with null dropped wherever `schema` does not allow it: null means "not given".

    OpenAI's strict mode sends null for each optional param left out (a required one: missing).
    """
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        properties = schema["properties"]
        return {
            key: without_nulls(properties.get(key, {}), item)
            for key, item in value.items()
            if not (item is None and key in properties and not allows_null(properties[key]))
        }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [without_nulls(schema["items"], item) for item in value]
    return value


def invalid_param(where: str, message: str) -> Invalid:
    """400 `invalid` naming the param: "Invalid param '<field>': …"."""
    prefix = f"Invalid param '{where}': " if where else "Invalid params: "
    return Invalid(prefix + message)


# How much of the offending value a schema error repeats: jsonschema's messages quote it whole,
# and a 100,000-character body came back whole in the error (and in a run's turn record).
QUOTED_VALUE_CHARS = 80


def _shortened(error) -> str:
    quoted = repr(error.instance)
    if len(quoted) <= QUOTED_VALUE_CHARS or quoted not in error.message:
        return error.message
    kept = f"{quoted[:QUOTED_VALUE_CHARS]}… ({len(quoted):,} characters)"
    return error.message.replace(quoted, kept)


def validate_params(tool: Tool, params: dict, caller: Caller) -> dict:
    """The params as the tool's handler receives them: the JSON Schema checks the shape first
    (types, no unknown param, which DRF would ignore), then the validator converts the values,
    with the caller in its context (a start names the caller's agents).
    """
    errors = sorted(tool.schema_validator.iter_errors(params), key=str)
    if errors:
        error = errors[0]
        where = ".".join(str(p) for p in error.absolute_path)
        if not where and error.validator == "required":
            where = error.message.split("'")[1] if "'" in error.message else ""
        if not where and error.validator == "additionalProperties":
            where = error.message.split("'")[1] if "'" in error.message else ""
        raise invalid_param(where, _shortened(error))
    if tool.validator is None:
        return params
    body = tool.validator(data=params, context={"caller": caller})
    if not body.is_valid():
        raise invalid_param(*first_error(body.errors))
    return dict(body.validated_data)


def call_tool(caller: Caller, name: str, params: dict | None, *, call_id: str | None = None) -> Any:
    """Run tool `name` as `caller`: unknown → 404, not allowed → 403 (`check_access`),
    bad params → 400, identity from the key. `call_id`: the model's (or the client's) id of
    the call, for its span."""
    with tracing.execute_tool(
        name,
        call_id=call_id,
        arguments=params,
        organization=caller.organization,
        agent=caller.agent,
    ) as span:
        return span.tool_result(_call_tool(caller, name, params))


def _call_tool(caller: Caller, name: str, params: dict | None) -> Any:
    tool = REGISTRY.get(name)
    if tool is None:
        raise NotFound(f"Unknown tool: {name}", "unknown_tool")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise Invalid("params must be an object.")
    params = dict(params)
    # MCP arguments reach here without the REST parsers' guard (NUL, lone surrogates, …).
    check_input(params, "params")
    check_identity(caller, params)
    check_access(caller, tool)
    for field in IDENTITY_FIELDS:
        params.pop(field, None)
    params = without_nulls(tool.input_schema, params)
    # Every door (REST, MCP, a managed agent's run) records its changes as this caller's.
    with acting_as(caller):
        validated = validate_params(tool, params, caller)
        try:
            for gate in GATES:
                gate(caller, tool, params)
            return tool.handler(caller, validated)
        except DomainError as exc:
            if exc.status == 202 and exc.body is not None:
                # A move that waits for a human: the tool's result says so, for a model to read.
                return exc.body
            tell_refused(exc, caller=caller)
            raise
