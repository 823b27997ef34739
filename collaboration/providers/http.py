"""The httpx client both SDKs are given: it keeps every attempt inside the agent's deadline.

The SDKs retry 429/5xx and timeouts themselves (`max_retries`), each attempt with the full
`timeout` and a back-off sleep in between. Without a clamp, an agent that hangs would hold its
slot for (retries + 1) x timeout; this transport gives each attempt only the time left, and once
the deadline has passed it answers for the server with a 408 marked `x-should-retry: false`, so
the SDK stops at once instead of sleeping and retrying. It also counts the attempts, which the
SDKs do not report.
"""

import time

import httpx2

# How close to the deadline a transport timeout counts as "the agent's time ran out".
DEADLINE_SLACK = 0.05


class DeadlineTransport(httpx2.HTTPTransport):
    def __init__(self, deadline: float | None, **kwargs):
        super().__init__(**kwargs)
        self.deadline = deadline
        self.attempts = 0
        self.expired = False

    def _expired_response(self, request: httpx2.Request) -> httpx2.Response:
        self.expired = True
        return httpx2.Response(
            408,
            headers={"x-should-retry": "false"},
            json={"error": {"message": "The agent's time ran out.", "type": "timeout"}},
            request=request,
        )

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.deadline is None:
            self.attempts += 1
            return super().handle_request(request)
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return self._expired_response(request)
        timeouts = dict(request.extensions.get("timeout") or {})
        for key in ("connect", "read", "write", "pool"):
            value = timeouts.get(key)
            timeouts[key] = remaining if value is None else min(value, remaining)
        request.extensions = {**request.extensions, "timeout": timeouts}
        self.attempts += 1
        try:
            return super().handle_request(request)
        except httpx2.TimeoutException:
            if self.deadline - time.monotonic() <= DEADLINE_SLACK:
                return self._expired_response(request)
            raise


def client_for(deadline: float | None) -> tuple[httpx2.Client, DeadlineTransport]:
    transport = DeadlineTransport(deadline)
    return httpx2.Client(transport=transport), transport


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
