"""Every failure a tool can raise becomes our error body as an MCP tool error (error_for)."""

import json

import pytest
from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions as drf

from infrastructure.errors import Conflict, exception_handler
from organization.mcp_server.errors import error_for


def body_of(exc: Exception) -> dict:
    result = error_for(exc)
    assert result.is_error is True
    (block,) = result.content
    return json.loads(block.text)


@pytest.mark.parametrize(
    "exc, error, code, status",
    [
        (
            Conflict("Alex is at capacity.", "capacity_exceeded"),
            "Alex is at capacity.",
            "capacity_exceeded",
            409,
        ),
        (
            drf.ValidationError({"title": ["This field is required."]}),
            "title: This field is required.",
            "invalid",
            400,
        ),
        (DjangoValidationError({"senior": ["No cycles."]}), "senior: No cycles.", "invalid", 400),
        (Http404("hidden"), "Not found.", "not_found", 404),
        (drf.NotFound(), "Not found.", "not_found", 404),
        (
            PermissionDenied(),
            "You do not have permission to perform this action.",
            "forbidden",
            403,
        ),
        (drf.Throttled(), "Request was throttled.", "rate_limited", 429),
        (
            drf.NotAuthenticated(),
            "Authentication credentials were not provided.",
            "authentication_required",
            401,
        ),
        (drf.MethodNotAllowed("PUT"), 'Method "PUT" not allowed.', "method_not_allowed", 405),
    ],
)
def test_known_failures_keep_their_code_and_status(exc, error, code, status):
    body = body_of(exc)
    assert body["success"] is False
    assert (body["code"], body["status"]) == (code, status)
    assert body["error"] == error
    # The same error as REST answers for it: one shape whatever the door.
    rest = exception_handler(exc, {})
    assert {**rest.data, "status": rest.status_code} == body


def test_an_unexpected_failure_is_logged_and_hidden(caplog):
    body = body_of(RuntimeError("secret detail"))
    assert body == {
        "success": False,
        "error": "The tool failed unexpectedly; the error was logged.",
        "code": "server_error",
        "status": 500,
    }
    assert "secret detail" not in json.dumps(body)
    assert any(r.exc_info and "secret detail" in str(r.exc_info[1]) for r in caplog.records)
