"""One domain error type, and the one exception handler that shapes every error response.

Every error answers `{"success": false, "error": "<sentence>", "code": "<machine_code>"}`.
"""

import logging

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.dispatch import Signal
from django.http import Http404, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class DomainError(Exception):
    """Raised by services; `status` is the HTTP status the API answers with."""

    def __init__(self, message: str, code: str, status: int = 400, body: dict | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        # The whole response body, for an answer that is no error (a move awaiting approval).
        self.body = body


class NotFound(DomainError):
    def __init__(self, message: str = "Not found", code: str = "not_found"):
        super().__init__(message, code, status.HTTP_404_NOT_FOUND)


class Forbidden(DomainError):
    def __init__(self, message: str, code: str = "forbidden"):
        super().__init__(message, code, status.HTTP_403_FORBIDDEN)


class Conflict(DomainError):
    def __init__(self, message: str, code: str):
        super().__init__(message, code, status.HTTP_409_CONFLICT)


class Invalid(DomainError):
    def __init__(self, message: str, code: str = "invalid"):
        super().__init__(message, code, status.HTTP_400_BAD_REQUEST)


class RateLimited(DomainError):
    """429; `retry_after` (seconds) is sent as the Retry-After header."""

    def __init__(self, message: str, retry_after: int, code: str = "rate_limited"):
        super().__init__(message, code, status.HTTP_429_TOO_MANY_REQUESTS)
        self.retry_after = retry_after


def error_body(message: str, code: str) -> dict:
    return {"success": False, "error": message, "code": code}


# Retryable database failures: a connection lost mid-request (the server restarted, a proxy cut
# it), the pool's wait for a free connection, a lock or statement timeout, a deadlock.
DATABASE_UNAVAILABLE = (
    "The database could not finish the request; retry in a moment. A write may or may not "
    "have taken effect: send an Idempotency-Key header to retry without doing it twice."
)


def database_unavailable(exc: Exception) -> Response | None:
    """503 with Retry-After for a database error the caller may retry, else None."""
    if not isinstance(exc, OperationalError | InterfaceError):
        return None
    if "database is locked" in str(exc):
        # SQLite (the embedded default) under more writers than its busy timeout waits for.
        body = error_body("The database is busy; try again in a moment.", "database_busy")
    else:
        logger.warning("Database unavailable: answered 503", exc_info=exc)
        body = error_body(DATABASE_UNAVAILABLE, "database_unavailable")
    return Response(body, status=503, headers={"Retry-After": "1"})


def first_error(detail, where: str = "") -> tuple[str, str]:
    """(dotted field path, message) of the first error in DRF's nested validation detail; an
    item of a list of objects (`many=True`) is named by its index."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            if not value:
                continue
            name = "" if key == "non_field_errors" else str(key)
            return first_error(value, ".".join(p for p in (where, name) if p))
    elif isinstance(detail, list):
        for index, item in enumerate(detail):
            if isinstance(item, dict | list):
                if item:
                    return first_error(item, f"{where}.{index}" if where else str(index))
            else:
                return where, str(item)
    else:
        return where, str(detail)
    return where, "Invalid input."


def first_validation_message(detail) -> str:
    """DRF's nested validation detail as one sentence naming the field."""
    where, message = first_error(detail)
    return f"{where}: {message}" if where else message


# Sent once for each refusal a door answers (a DomainError of status 403 or 409): with the
# `request` at the REST door, the `caller` at the tool door. The metrics count them by code.
refused = Signal()
REFUSAL_STATUSES = frozenset({403, 409})


def tell_refused(error: "DomainError", **where) -> None:
    """Send `refused` for `error` if it is a refusal not told yet (a tool called over REST meets
    both doors)."""
    if error.status in REFUSAL_STATUSES and not getattr(error, "told", False):
        error.told = True
        refused.send(sender=DomainError, error=error, **where)


_CODES = {
    exceptions.NotAuthenticated: "authentication_required",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "rate_limited",
    exceptions.ParseError: "parse_error",
}


def exception_handler(exc, context):
    response = _error_response(exc, context)
    request = context.get("request")
    if response is not None and request is not None:
        # An error is JSON even for a browser that asked for the browsable API (`?format=api`,
        # `Accept: text/html`): DRF renders the response with the request's chosen renderer.
        from infrastructure.renderers import OrjsonRenderer

        request.accepted_renderer = OrjsonRenderer()
        request.accepted_media_type = OrjsonRenderer.media_type
    return response


def _error_response(exc, context):
    # Imported here: rest_framework.views loads the API settings, which import this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    unavailable = database_unavailable(exc)
    if unavailable is not None:
        return unavailable
    if isinstance(exc, DomainError):
        tell_refused(exc, request=context.get("request"))
        headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, RateLimited) else None
        body = exc.body if exc.body is not None else error_body(exc.message, exc.code)
        return Response(body, status=exc.status, headers=headers)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, DjangoValidationError):
        # A model's clean() refusing input is the caller's mistake (400), never a 500.
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        exc = exceptions.ValidationError(detail)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body(first_validation_message(exc.detail), "invalid")
        return response
    code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), "error")
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    response.data = error_body(str(message), code)
    return response


# --- Django's error views (config/urls.py): JSON under /api/, Django's HTML pages elsewhere ---


def is_api_request(request) -> bool:
    return request.path_info.startswith("/api/")


def bad_request(request, exception, *args, **kwargs):
    if is_api_request(request):
        return JsonResponse(error_body("Bad request.", "invalid"), status=400)
    return defaults.bad_request(request, exception, *args, **kwargs)


def page_not_found(request, exception, *args, **kwargs):
    if is_api_request(request):
        message = f"No such endpoint: {request.method} {request.path_info}"
        return JsonResponse(error_body(message, "not_found"), status=404)
    return defaults.page_not_found(request, exception, *args, **kwargs)


def server_error(request, *args, **kwargs):
    if is_api_request(request):
        message = "The server failed unexpectedly; the error was logged."
        return JsonResponse(error_body(message, "server_error"), status=500)
    return defaults.server_error(request, *args, **kwargs)
