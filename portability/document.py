"""The file itself: its format and version, its JSON Schema, and the refusal that names the item."""

import json
from functools import cache
from pathlib import Path

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from rest_framework.exceptions import ValidationError as SerializerError

from infrastructure.errors import DomainError, Invalid
from infrastructure.inputs import value_problem

FORMAT = "agent-org"
VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("agent-org.schema.json")


class Refused(Invalid):
    """The file cannot be imported as it is; the message names the item and what is wrong."""

    def __init__(self, message: str):
        super().__init__(message, "org_file_refused")


@cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def parse(text: str | bytes) -> dict:
    """The document of a file's text, refused unless it is JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise Refused(f"The file is not JSON: {exc}") from exc


def check(document) -> None:
    """Refuse a document that is not an agent-org file of this version or breaks its schema."""
    if not isinstance(document, dict):
        raise Refused("The file holds no JSON object: an agent-org file is one.")
    if document.get("format") != FORMAT:
        raise Refused(f'Not an agent-org file: its "format" is {document.get("format")!r}.')
    if document.get("version") != VERSION:
        raise Refused(
            f"Version {document.get('version')!r} of the agent-org format is not read here: "
            f"this install reads version {VERSION}."
        )
    problem = value_problem(document, "")
    if problem:  # what no column can hold (a NUL character): refused as the API refuses it
        raise Refused(f"{problem.lstrip('.')}.")
    errors = sorted(
        Draft202012Validator(schema()).iter_errors(document), key=lambda e: list(e.path)
    )
    if errors:
        error = errors[0]
        raise Refused(f"{where(document, list(error.path))}: {error.message}")


def where(document: dict, path: list) -> str:
    """`agents[2] (agent-x).workload_capacity`: a path in the file, naming the item it is in."""
    if not path:
        return "the file"
    text = str(path[0])
    if len(path) > 1 and isinstance(path[1], int):
        text += f"[{path[1]}]"
        item = document.get(path[0])[path[1]]
        name = (
            item.get("id") or item.get("name") or item.get("agent")
            if isinstance(item, dict)
            else None
        )
        if isinstance(name, str):
            text += f" ({name})"
        rest = path[2:]
    else:
        rest = path[1:]
    return ".".join([text, *(str(part) for part in rest)])


def reason(exc: Exception) -> str:
    """The words of a refusal from a service, a model's validation or a serializer."""
    if isinstance(exc, DomainError):
        return exc.message
    if isinstance(exc, ValidationError):
        if hasattr(exc, "error_dict"):
            return "; ".join(
                f"{field}: {' '.join(messages)}" if field != "__all__" else " ".join(messages)
                for field, messages in exc.message_dict.items()
            )
        return " ".join(exc.messages)
    if isinstance(exc, SerializerError):
        return "; ".join(_flatten(exc.detail))
    raise TypeError(exc)


def _flatten(detail, prefix: str = "") -> list[str]:
    if isinstance(detail, dict):
        return [
            line
            for field, inner in detail.items()
            for line in _flatten(
                inner, f"{prefix}{field}: " if field != "non_field_errors" else prefix
            )
        ]
    if isinstance(detail, list):
        return [line for inner in detail for line in _flatten(inner, prefix)]
    return [f"{prefix}{detail}"]
