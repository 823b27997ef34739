"""The httpx client both SDKs are given: it keeps every attempt inside the agent's deadline.

Past the deadline it answers a 408 the SDK does not retry; it also counts the attempts."""

import contextvars
import os
import random
import threading
import time
from collections.abc import Callable

import httpx2
from django.conf import settings

from . import slots
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
            # As many connections as calls may be in flight: the slots bound them, not the pool.
            size = settings.LLM_MAX_CALLS_IN_FLIGHT
            limits = httpx2.Limits(max_connections=size, max_keepalive_connections=size)
            _client = httpx2.Client(transport=DeadlineTransport(limits=limits))
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
    """Run `create()` (one SDK call, its retries included) in one of the provider's model slots;
    map the SDK's errors to ours. A 429 that outlasts the SDK's retries waits and tries again
    (up to LLM_RATE_LIMIT_MAX_WAIT_SECONDS, within the deadline) instead of failing the call.
    `sdk`: the `openai` or `anthropic` module (both define the errors used here)."""
    waited = 0.0
    while True:
        try:
            with slots.model_slot(name):
                return create()
        except sdk.RateLimitError as exc:
            pause = rate_limit_pause(exc, waited)
            if pause is None or not _fits(state, pause):
                raise ProviderError(
                    f"{name}: HTTP 429 after {state.attempts} attempt(s) and {waited:g} s of "
                    f"waiting: {exc.message}"
                ) from exc
            slots.say_waiting(slots.RATE_LIMIT)
            time.sleep(pause)
            slots.say_waiting("")
            waited += pause
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


# The first pause after a 429 the SDK gave up on, doubled at each one after, at most a minute.
RATE_LIMIT_FIRST_PAUSE = 1.0
RATE_LIMIT_LONGEST_PAUSE = 60.0


def rate_limit_pause(exc, waited: float) -> float | None:
    """Seconds to wait before trying again: the provider's Retry-After if it gives one, else a
    doubling pause with jitter; None once LLM_RATE_LIMIT_MAX_WAIT_SECONDS would be passed."""
    headers = exc.response.headers
    retry_after = _seconds(headers.get("retry-after-ms"), 1000) or _seconds(
        headers.get("retry-after")
    )
    backoff = min(RATE_LIMIT_LONGEST_PAUSE, max(RATE_LIMIT_FIRST_PAUSE, waited))
    pause = retry_after if retry_after is not None else backoff * random.uniform(0.75, 1.25)  # noqa: S311
    if waited + pause > settings.LLM_RATE_LIMIT_MAX_WAIT_SECONDS:
        return None
    return pause


def _seconds(value: str | None, per_second: int = 1) -> float | None:
    try:
        seconds = float(value) / per_second if value is not None else None
    except ValueError:
        return None  # an HTTP date: the doubling pause stands in
    return seconds if seconds is not None and 0 < seconds <= RATE_LIMIT_LONGEST_PAUSE else None


def _fits(state: CallState, pause: float) -> bool:
    return state.deadline is None or time.monotonic() + pause < state.deadline
