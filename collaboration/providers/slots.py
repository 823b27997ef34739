"""Model-call slots: how many calls a worker process has in flight, overall and per provider.

Past a bound a call waits its turn (first come, first served) holding no database connection;
whoever made it may say so meanwhile (`waiting`)."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import deque
from collections.abc import Callable, Iterator

from django.conf import settings

from infrastructure.connections import release_connection

# What the caller is told while its call waits: "model_slot" (the bound) or "rate_limit" (the
# provider's 429), then "" once it goes on.
WaitHook = Callable[[str], None]
_on_wait: contextvars.ContextVar[WaitHook | None] = contextvars.ContextVar(
    "agent_org_model_wait", default=None
)
MODEL_SLOT, RATE_LIMIT = "model_slot", "rate_limit"


class FairSlots:
    """A counting semaphore that serves its waiters in arrival order."""

    def __init__(self, size: int):
        self.size, self.used = size, 0
        self._lock = threading.Lock()
        self._waiters: deque[threading.Event] = deque()

    def try_acquire(self) -> bool:
        with self._lock:
            if self.used < self.size and not self._waiters:
                self.used += 1
                return True
            return False

    def acquire(self) -> None:
        with self._lock:
            if self.used < self.size and not self._waiters:
                self.used += 1
                return
            turn = threading.Event()
            self._waiters.append(turn)
        turn.wait()  # the releaser counted this call in before waking it

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().set()
            else:
                self.used -= 1


_lock = threading.Lock()
_slots: dict[str, FairSlots] = {}


def _slots_for(key: str, size: int) -> FairSlots:
    with _lock:
        slots = _slots.get(key)
        if slots is None or slots.size != size:
            slots = _slots[key] = FairSlots(size)
        return slots


def _bounds(provider: str) -> list[FairSlots]:
    total = settings.LLM_MAX_CALLS_IN_FLIGHT
    own = settings.LLM_MAX_CALLS_PER_PROVIDER.get(provider, total)
    return [_slots_for("*", total), _slots_for(provider, own)]


@contextlib.contextmanager
def model_slot(provider: str) -> Iterator[None]:
    """Hold a slot of the process and one of `provider` for one model call; the thread's
    database connection is given back first."""
    release_connection()
    taken: list[FairSlots] = []
    try:
        for slots in _bounds(provider):
            if not slots.try_acquire():
                say_waiting(MODEL_SLOT)
                slots.acquire()
                say_waiting("")
            taken.append(slots)
        yield
    finally:
        for slots in reversed(taken):
            slots.release()


def say_waiting(reason: str) -> None:
    hook = _on_wait.get()
    if hook is not None:
        hook(reason)
        release_connection()


@contextlib.contextmanager
def waiting(hook: WaitHook) -> Iterator[None]:
    """Tell `hook` when this thread's model calls wait, and for what."""
    token = _on_wait.set(hook)
    try:
        yield
    finally:
        _on_wait.reset(token)
