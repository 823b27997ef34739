"""Every tool of the registry works for clients no one here wrote: closed, described params,
MCP annotations, and OpenAI's strict mode (null for an optional param left out)."""

import copy
import json

import pytest
from django.db import transaction
from jsonschema import Draft202012Validator
from openai.lib._pydantic import _ensure_strict_json_schema

from infrastructure.errors import DomainError
from organization.caller import Caller
from organization.registry import REGISTRY, allows_null, call_tool
from tests.conftest import KeyClient
from tests.factories import make_agent, make_key, make_org


def object_schemas(schema: dict, where: str):
    """(where, schema) of every object in a tool's params, nested ones included."""
    if schema.get("type") == "object":
        yield where, schema
    for name, sub in schema.get("properties", {}).items():
        yield from object_schemas(sub, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from object_schemas(schema["items"], f"{where}[]")


def all_objects():
    return [
        (f"{tool.name}{where}", schema)
        for tool in REGISTRY.values()
        for where, schema in object_schemas(tool.input_schema, "")
    ]


def test_every_tool_schema_is_closed_and_every_param_described():
    open_objects, undescribed = [], []
    for where, schema in all_objects():
        # An object with named fields is closed; only free-form maps (a session's `context`)
        # have no fields to close over.
        if schema.get("properties") and schema.get("additionalProperties") is not False:
            open_objects.append(where)
        for name, sub in schema.get("properties", {}).items():
            if not sub.get("description", "").strip():
                undescribed.append(f"{where}.{name}")
    assert open_objects == []
    assert undescribed == []
    assert REGISTRY["start_collaboration"].input_schema["additionalProperties"] is False


def test_every_tool_carries_a_title_and_mcp_hints():
    for tool in REGISTRY.values():
        hints = tool.annotations()
        assert hints["title"] and hints["title"] == tool.title, tool.name
        assert hints["readOnlyHint"] is tool.read_only
        if not tool.read_only:
            # MCP's default destructiveHint is true: a writing tool must say what it is.
            assert isinstance(hints["destructiveHint"], bool), tool.name
            assert isinstance(hints["idempotentHint"], bool), tool.name
    assert REGISTRY["update_task_status"].annotations()["destructiveHint"] is True
    assert REGISTRY["get_inbox"].annotations()["idempotentHint"] is True
    create = REGISTRY["create_task"].annotations()
    assert (create["title"], create["destructiveHint"], create["idempotentHint"]) == (
        "Create task",
        False,
        False,
    )


def test_get_api_tools_serves_titles_and_annotations(db):
    org = make_org()
    sarah = make_agent(org, "agent-sarah")
    listed = KeyClient(make_key(org, sarah)).get("/api/tools").json()
    by_name = {t["name"]: t for t in listed}
    assert by_name["update_task_status"]["title"] == "Update task status"
    assert by_name["update_task_status"]["annotations"] == {
        "title": "Update task status",
        "readOnlyHint": False,
        "openWorldHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
    }
    assert by_name["get_organization_roster"]["annotations"]["readOnlyHint"] is True


def strict_mode(schema: dict) -> dict:
    """What a strict-mode client sees (the Agents SDK's pattern for an optional field
    `x: T | None = None`): every param required, the optional ones nullable; then OpenAI's own
    strict transformation, which refuses what strict mode cannot express."""
    schema = copy.deepcopy(schema)

    def nullable(node: dict) -> None:
        properties = node.get("properties")
        if isinstance(properties, dict):
            required = set(node.get("required", []))
            for name, sub in list(properties.items()):
                nullable(sub)
                if name not in required and not allows_null(sub):
                    properties[name] = {"anyOf": [sub, {"type": "null"}]}
        if isinstance(node.get("items"), dict):
            nullable(node["items"])

    nullable(schema)
    return _ensure_strict_json_schema(schema, path=(), root=schema)


def unknown_formats(node) -> list:
    from collaboration.providers.openai import STRICT_FORMATS

    if isinstance(node, list):
        return [f for item in node for f in unknown_formats(item)]
    if not isinstance(node, dict):
        return []
    own = [node["format"]] if "format" in node and node["format"] not in STRICT_FORMATS else []
    return own + [f for value in node.values() for f in unknown_formats(value)]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_our_strict_schema_keeps_only_the_formats_strict_mode_knows(name):
    """Strict mode knows a few string formats (date-time, uuid…): int64, double, decimal go."""
    from collaboration.providers.openai import strict_schema

    assert unknown_formats(strict_schema(REGISTRY[name].input_schema)) == []


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_tool_schema_survives_openai_strict_mode(name):
    strict = strict_mode(REGISTRY[name].input_schema)
    Draft202012Validator.check_schema(strict)
    for where, schema in object_schemas(strict, name):
        assert schema["additionalProperties"] is False, where
        assert sorted(schema.get("required", [])) == sorted(schema.get("properties", {})), where


FREE_FORM = [
    ("complete_task", "result_data"),
    ("update_task_status", "result_data"),
    ("start_collaboration", "context"),
]


@pytest.mark.parametrize("tool, param", FREE_FORM)
def test_a_strict_mode_client_sends_a_free_form_object_as_json_text(tool, param):
    """Strict mode closes every object (a free-form one could only be {}): the tool offers it
    as JSON text alone, valid under both strict transformations (the SDK's and ours); the
    registry still takes the object (tests/tasks/test_results.py)."""
    from collaboration.providers.openai import strict_schema

    schema = REGISTRY[tool].input_schema
    value = json.dumps({"url": "https://x.test/report", "rows": 3})
    for strict in (strict_mode(schema), strict_schema(schema)):
        Draft202012Validator.check_schema(strict)
        sent = with_nulls(
            schema,
            {
                "task_id": 1,
                "status": "completed",
                "task": "t",
                "agents": [{"name": "a"}],
                param: value,
            },
        )
        sent = {k: v for k, v in sent.items() if k in strict["properties"]}
        assert list(Draft202012Validator(strict).iter_errors(sent)) == []
    open_objects = [
        where
        for where, node in object_schemas(strict_schema(schema), tool)
        if node.get("additionalProperties") is not False
    ]
    assert open_objects == []


def test_result_data_as_json_text_is_stored_as_the_object(db):
    org = make_org()
    sarah = make_agent(org, "agent-sarah")
    client = KeyClient(make_key(org, sarah))
    me = Caller(organization=org, agent=sarah)

    def started():
        task = call_tool(me, "create_task", {"title": "t", "agent_id": "agent-sarah"})
        call_tool(me, "update_task_status", {"task_id": task["id"], "status": "in_progress"})
        return task

    task = started()
    body = {
        "toolName": "complete_task",
        "params": {"task_id": task["id"], "result": "done", "result_data": '{"rows": 3}'},
    }
    response = client.post("/api/agent-engine/call-tool", body, format="json")
    assert response.status_code == 200, response.json()
    assert client.get(f"/api/tasks/{task['id']}").json()["result_data"] == {"rows": 3}
    # Not an object, not JSON, or what the database cannot store (the body's own guard).
    deep = '{"a": ' + "[" * 100 + "]" * 100 + "}"
    for text in ("[1, 2]", "not json", '{"a": NaN}', '{"a": "\\u0000"}', deep):
        body["params"].update(task_id=started()["id"], result_data=text)
        refused = client.post("/api/agent-engine/call-tool", body, format="json")
        assert (refused.status_code, refused.json()["code"]) == (400, "invalid")


# What each required param needs to be called for real; anything else is derived from its schema.
def required_value(name: str, schema: dict, world: dict):
    if name == "task" and schema.get("type") == "integer":
        return world["task_id"]  # ask_human's task is an id, start_collaboration's a text
    if name in world:
        return world[name]
    if allows_null(schema):
        return None
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    return {
        "string": "x",
        "integer": 1,
        "number": 1,
        "boolean": False,
        "array": [],
        "object": {},
    }.get(kind)


def with_nulls(schema: dict, value):
    """`value` as a strict-mode client sends it: every absent optional param as null."""
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        out = {k: with_nulls(schema["properties"].get(k, {}), v) for k, v in value.items()}
        for key in schema["properties"]:
            out.setdefault(key, None)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [with_nulls(schema["items"], item) for item in value]
    return value


def outcome(caller: Caller, name: str, params: dict):
    """The call's outcome, rolled back so both calls start from the same state."""
    try:
        with transaction.atomic():
            result = call_tool(caller, name, params)
            transaction.set_rollback(True)
    except DomainError as exc:
        return ("error", exc.code, exc.status)
    return ("ok", sorted(result) if isinstance(result, dict) else type(result).__name__)


def test_each_tool_called_with_every_optional_param_null_answers_as_without_them(db):
    org = make_org()
    sarah = make_agent(org, "agent-sarah", expertise=["python"])
    make_agent(org, "agent-alex", expertise=["python"])
    caller = Caller(organization=org, agent=sarah)
    task = call_tool(caller, "create_task", {"title": "t", "agent_id": "agent-sarah"})
    session = call_tool(caller, "start_collaboration", {"task": "t", "agents": [{"name": "a"}]})
    world = {
        "task_id": task["id"],
        "agent_id": "agent-alex",
        "session_id": session["id"],
        "title": "A task",
        "status": "in_progress",
        "expertise": "python",
        "task": "Plan it",
        "agents": [{"name": "analyst"}],
        "parent": task["id"],
        "body": "A comment",
    }
    for name, tool in sorted(REGISTRY.items()):
        schema = tool.input_schema
        bare = {
            key: required_value(key, schema["properties"][key], world)
            for key in schema.get("required", [])
        }
        strict = with_nulls(schema, bare)
        # The arguments a strict-mode client would send are valid under its strict schema.
        Draft202012Validator(strict_mode(schema)).validate(strict)
        expected = outcome(caller, name, bare)
        got = outcome(caller, name, strict)
        assert got == expected, name
        assert got[:2] != ("error", "invalid"), (name, got)


def test_a_required_param_sent_as_null_is_refused_as_missing(db):
    org = make_org()
    caller = Caller(organization=org, agent=make_agent(org, "agent-sarah"))
    with pytest.raises(DomainError) as refused:
        call_tool(caller, "create_task", {"title": None})
    assert (refused.value.code, refused.value.status) == ("invalid", 400)
    assert "title" in refused.value.message


def test_call_tool_accepts_null_for_optional_params(db):
    org = make_org()
    sarah = make_agent(org, "agent-sarah")
    response = KeyClient(make_key(org, sarah)).post(
        "/api/agent-engine/call-tool",
        {
            "toolName": "get_my_tasks",
            "params": {"status": None, "role": None, "limit": None},
            "agentId": None,
            "organizationId": None,
        },
        format="json",
    )
    assert response.status_code == 200
    assert response.json() == {"tasks": [], "count": 0}


def test_bad_params_answer_invalid_like_rest(db):
    org = make_org()
    sarah = make_agent(org, "agent-sarah")
    client = KeyClient(make_key(org, sarah))
    tool = client.post(
        "/api/agent-engine/call-tool",
        {"toolName": "create_task", "params": {"title": "x", "urgency": "soon"}},
        format="json",
    )
    rest = client.post("/api/tasks", {"title": "x", "urgency": "soon"}, format="json")
    assert (tool.status_code, tool.json()["code"]) == (rest.status_code, rest.json()["code"])
    assert (tool.status_code, tool.json()["code"]) == (400, "invalid")
