"""What untrusted input may contain before it reaches the database: one guard for every door.

PostgreSQL refuses NUL characters in text, psycopg cannot encode a lone surrogate (JSON's
`"\\ud800"`), a bigint holds 64 bits and JSON columns refuse NaN and infinities. Each of those
would otherwise surface as a 500 deep in a query. The API middleware (path and query string),
the API's body parsers and the tool registry (call-tool and MCP arguments) all check here,
so they answer the same 400 `invalid`.
"""

import math
import re

from .errors import Invalid

BIGINT_MAX = 2**63 - 1
# Deeper than any body this API takes; bounds the work of one request.
MAX_DEPTH = 64
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None."""
    found = _BAD_CHARS.search(value)
    if found is None:
        return None
    return "contains a NUL character" if found.group() == "\x00" else "contains a lone surrogate"


def value_problem(value, where: str = "body") -> str | None:
    """The first reason a parsed JSON value (or form/query data) cannot be stored, or None.

    Iterative, so a value nested as deep as the JSON parser allows cannot exhaust the stack.
    """
    stack = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"{path}: nested deeper than {MAX_DEPTH} levels"
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return f"{path}: {problem}"
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not -BIGINT_MAX - 1 <= item <= BIGINT_MAX:
                return f"{path}: the number is out of range"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{path}: the number is out of range"
        elif isinstance(item, dict):
            for key, child in item.items():
                name = str(key)
                problem = text_problem(name)
                if problem:
                    return f"{path}: a key {problem}"
                stack.append((child, f"{path}.{name}", depth + 1))
        elif isinstance(item, list | tuple):
            for index, child in enumerate(item):
                stack.append((child, f"{path}[{index}]", depth + 1))
    return None


def check_input(value, where: str = "body") -> None:
    """Raise 400 `invalid` if `value` holds something the database cannot store."""
    problem = value_problem(value, where)
    if problem:
        raise Invalid(f"Invalid input: {problem}.", "invalid")


def parse_id(value) -> int | None:
    """A positive database id from a path or a parameter, or None (which the caller turns into
    its 404): ASCII digits only (`str.isdigit` accepts "²") and no wider than a bigint."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.isascii() and value.isdigit():
        number = int(value)
    else:
        return None
    return number if 0 < number <= BIGINT_MAX else None
