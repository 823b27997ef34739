"""The table of API endpoints that tests/test_tenancy.py checks for authentication and tenancy.

Each app lists its endpoints in `tests/<app>/endpoints.py` as a module-level
`ENDPOINTS: list[Endpoint]`. tests/test_tenancy.py collects every such module and checks:

1. without credentials (and with a bad key) every endpoint answers 401;
2. an "object" endpoint called with a key of ANOTHER organization (an agent key and an
   organization key) answers 404, exactly as if the object did not exist;
   a "collection" endpoint never shows the other organization's objects;
3. every route under `/api/` (and every HTTP method its view implements) has a row here,
   so a new endpoint cannot be forgotten.

The contract of a row:

- `method`: "GET", "POST", …
- `path`: a template such as "/api/agents/{agent_id}" (a query string is allowed:
  "/api/roster?filter=all"); it is filled with the dict `setup` returns.
- `setup(org) -> dict`: creates inside `org` whatever the endpoint needs (an agent, a task …)
  and returns the path kwargs. For a "collection" the returned values also serve as markers:
  none of them, nor any agent handle or team name of `org`, may appear in the answer
  another organization gets. Return distinctive strings (handles, titles), not bare integers.
- `body`: the JSON body for POST/PUT/PATCH; its string values are formatted with the kwargs
  too, so a body can point at the other organization's object.
- `kind`: "object" (another organization → 404) or "collection" (→ never shows theirs).
- `callers`: which keys of the other organization are tried ("agent", "org").
- `auth`: "key" (an API key), or "signature" for an endpoint a signature authenticates instead
  (the routines' inbound webhook): there every call here, with or without a key, answers 401
  `invalid_signature`.

Example (a task endpoint, in tests/tasks/endpoints.py)::

    def a_task(org):
        agent = make_agent(org)
        task = give_tasks(agent, 1)[0]
        return {"task_id": task.pk, "title": task.title}

    ENDPOINTS = [
        Endpoint("GET", "/api/tasks/{task_id}", a_task),
        Endpoint("POST", "/api/tasks/{task_id}/cancel", a_task, body={}),
        Endpoint("GET", "/api/tasks", a_task, kind="collection"),
    ]
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from organization.models import Organization

OBJECT = "object"
COLLECTION = "collection"
KEY = "key"
SIGNATURE = "signature"


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    setup: Callable[[Organization], dict] | None = None
    body: dict | None = None
    kind: str = OBJECT
    callers: tuple[str, ...] = field(default=("agent", "org"))
    auth: str = KEY

    def __post_init__(self):
        if self.kind not in (OBJECT, COLLECTION):
            raise ValueError(f"kind must be 'object' or 'collection', not {self.kind!r}")
        if self.auth not in (KEY, SIGNATURE):
            raise ValueError(f"auth must be 'key' or 'signature', not {self.auth!r}")

    @property
    def id(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def route(self) -> str:
        """The path without its query string, for the coverage check."""
        return self.path.split("?", 1)[0]

    def prepare(self, org: Organization) -> tuple[str, dict | None, dict]:
        """Run `setup` in `org`; return (url, body, kwargs)."""
        kwargs = self.setup(org) if self.setup else {}
        return self.path.format(**kwargs), _fill(self.body, kwargs), kwargs


def _fill(value, kwargs: dict):
    if isinstance(value, str):
        # "{task_id}" alone keeps the kwarg's type (an int stays an int).
        if value.startswith("{") and value.endswith("}") and value[1:-1] in kwargs:
            return kwargs[value[1:-1]]
        return value.format(**kwargs)
    if isinstance(value, dict):
        return {k: _fill(v, kwargs) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, kwargs) for v in value]
    return value
