"""What the threads of one session run share: the session, its stop/cancel flags, its token count."""

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db.models import Sum

from ..models import CollaborationSession, Contribution


@dataclass
class Slot:
    """One agent's run inside a batch, as the session thread sees it."""

    contribution: Contribution
    # time.monotonic() by which the running attempt must be over; set by the agent's thread.
    deadline: float | None = None
    future: object = None


@dataclass
class RunContext:
    session: CollaborationSession
    # The lease this run took (lease.claim): only the run holding it writes the outcome.
    token: str = ""
    # The session's mode (modes.mode_for), set by run_session: one agent's run asks it for its
    # brief, and the agent module does not import the modes (they run agents).
    mode: object = None
    # Set when run_session is over: an agent not started by then never starts.
    stop: threading.Event = field(default_factory=threading.Event)
    cancelled: threading.Event = field(default_factory=threading.Event)
    # Set by the heartbeat when another run took the lease (this one was thought dead).
    lease_lost: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    inflight: int = 0
    peak: int = 0
    # Tokens spent by this session so far (kept here: a query per call costs the agents time).
    tokens: int = 0
    # The session's contributions as read when the run began; an agent's object takes the values
    # its claim and settle write.
    contributions: list[Contribution] = field(default_factory=list)

    @property
    def session_id(self):
        return self.session.pk

    @contextmanager
    def track(self):
        """Counts LLM calls in flight, for metadata.peak_parallel."""
        with self.lock:
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
        try:
            yield
        finally:
            with self.lock:
                self.inflight -= 1

    def cancel_seen(self) -> bool:
        """Whether the session's cancel was requested: the heartbeat's flag, else its row (asked
        by a step about to start spending, so a cancel accepted just before it starts nothing)."""
        if not self.cancelled.is_set() and (
            CollaborationSession.objects.filter(pk=self.session_id, cancel_requested=True).exists()
        ):
            self.cancelled.set()
        return self.cancelled.is_set()

    def load_tokens(self) -> None:
        """What earlier runs of this session spent (a resumed session keeps its budget)."""
        if self.session.attempts <= 1:
            return  # the first run: nothing spent yet
        agents = Contribution.objects.filter(session_id=self.session_id).aggregate(
            n=Sum("tokens_used")
        )["n"]
        self.tokens = (agents or 0) + int(self.session.metadata.get("synthesis_tokens", 0))

    def spend(self, tokens: int) -> None:
        with self.lock:
            self.tokens += tokens

    def budget_left(self) -> int:
        with self.lock:
            return self.session.max_total_tokens - self.tokens
