"""The httpx client both SDKs are given: it keeps every attempt inside the agent's deadline.

Past the deadline it answers a 408 the SDK does not retry; it also counts the attempts."""

import contextvars
import os
import threading
import time
from collections.abc import Callable

import httpx2
from django.conf import settings

from .base import ProviderError, ProviderTimeout

# How close to the deadline a transport timeout counts as "the agent's time ran out".
DEADLINE_SLACK = 0.05


class CallState:
    """The deadline and the attempt count of the call running in this thread."""

    def __init__(self, deadline: float | None):
        self.deadline = deadline
        self.attempts = 0
        self.expired = False


_current: contextvars.ContextVar[CallState | None] = contextvars.ContextVar(
    "collaboration_llm_call", default=None
)


class DeadlineTransport(httpx2.HTTPTransport):
    """One shared, thread-safe connection pool; the per-call state lives in a context variable."""

    @property
    def state(self) -> CallState:
        return _current.get() or CallState(None)

    def _expired_response(self, request: httpx2.Request) -> httpx2.Response:
        self.state.expired = True
        return httpx2.Response(
            408,
            headers={"x-should-retry": "false"},
            json={"error": {"message": "The agent's time ran out.", "type": "timeout"}},
            request=request,
        )

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        state = self.state
        if state.deadline is None:
            state.attempts += 1
            return super().handle_request(request)
        remaining = state.deadline - time.monotonic()
        if remaining <= 0:
            return self._expired_response(request)
        timeouts = dict(request.extensions.get("timeout") or {})
        for key in ("connect", "read", "write", "pool"):
            value = timeouts.get(key)
            timeouts[key] = remaining if value is None else min(value, remaining)
        request.extensions = {**request.extensions, "timeout": timeouts}
        state.attempts += 1
        try:
            return super().handle_request(request)
        except httpx2.TimeoutException:
            if state.deadline - time.monotonic() <= DEADLINE_SLACK:
                return self._expired_response(request)
            raise


_client: httpx2.Client | None = None
_client_lock = threading.Lock()


def shared_client() -> httpx2.Client:
    """One client per process: building one (its TLS context) is costly per call."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx2.Client(transport=DeadlineTransport())
        return _client


def client_for(deadline: float | None) -> tuple[httpx2.Client, CallState]:
    """The shared client, and the state of a new call (this thread's) bound to `deadline`."""
    state = CallState(deadline)
    _current.set(state)
    return shared_client(), state


def timeout_for(deadline: float | None, default: float) -> float:
    if deadline is None:
        return default
    return max(0.001, deadline - time.monotonic())


def headers_for(request) -> dict:
    # Lets a proxy, a log or the test server tell the calls of a session apart.
    return {
        "X-Collaboration-Agent": request.label or "-",
        "X-Collaboration-Purpose": request.purpose,
    }


def sdk_options(request, key_variable: str) -> tuple[dict, CallState]:
    """The constructor arguments both SDK clients take, and the state of this call; the key from
    the SDK's own environment variable only (local servers need none, the SDKs insist on one)."""
    http_client, state = client_for(request.deadline)
    options = {
        "api_key": os.environ.get(key_variable) or "no-key-configured",
        "timeout": timeout_for(request.deadline, settings.COLLAB_AGENT_TIMEOUT),
        "max_retries": settings.COLLAB_PROVIDER_MAX_RETRIES,
        "http_client": http_client,
        "default_headers": headers_for(request),
    }
    return options, state


def sdk_call(name: str, sdk, state: CallState, create: Callable[[], object]):
    """Run `create()` (one SDK call, its retries included); map the SDK's errors to ours. `sdk`: the
    `openai` or `anthropic` module (both define APITimeoutError, APIStatusError and APIError)."""
    try:
        return create()
    except sdk.APITimeoutError as exc:
        raise ProviderTimeout(f"{name}: timed out after {state.attempts} attempt(s)") from exc
    except sdk.APIStatusError as exc:
        if state.expired:
            raise ProviderTimeout(
                f"{name}: the agent's time ran out after {state.attempts} attempt(s)"
            ) from exc
        raise ProviderError(
            f"{name}: HTTP {exc.status_code} after {state.attempts} attempt(s): {exc.message}"
        ) from exc
    except sdk.APIError as exc:
        raise ProviderError(f"{name}: {exc.message}") from exc
    except RecursionError as exc:  # the SDK parsing a response nested past Python's limit
        raise ProviderError(f"{name}: the response nests too deep to be read") from exc
