"""The process-wide pool of agent threads, and the database connections its threads keep."""

import contextlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

from django.conf import settings
from django.db import connection

from infrastructure import tracing

from .context import RunContext, Slot

# One pool of agent threads per worker process, shared by its sessions. With psycopg's pool (the
# default on PostgreSQL) a thread returns its connection after each agent; without it a warm
# thread keeps its connection while the process has sessions to run, and closes it
# COLLAB_IDLE_CLOSE_SECONDS after the last session ends (the test suite sets 0).
# A batch's own semaphore bounds its concurrency to max_parallel; a hung agent keeps its permit
# until its HTTP call gives up at the deadline, so max_parallel is never exceeded.
AGENT_THREADS = 64
IDLE_CONNECTION_SECONDS = 60
_pool: ThreadPoolExecutor | None = None
_pool_pid: int | None = None
_pool_lock = threading.Lock()
_thread_state = threading.local()
_active_sessions = 0
_generation = 0


def agent_pool() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():  # a forked child needs its own threads
            _pool = ThreadPoolExecutor(max_workers=AGENT_THREADS, thread_name_prefix="collab-agent")
            _pool_pid = os.getpid()
        return _pool


def _fresh_connection() -> None:
    """Reuse this thread's connection, unless it sat idle long enough to have been dropped."""
    last = getattr(_thread_state, "last_used", None)
    if last is not None and time.monotonic() - last > IDLE_CONNECTION_SECONDS:
        connection.close()
    _thread_state.last_used = time.monotonic()


def specialist_span(slot: Slot):
    """The specialist's `invoke_agent` span (docs/observability.md): an agent of the
    organization, or an ad-hoc one known by its name."""
    if not tracing.enabled():
        return contextlib.nullcontext()
    c = slot.contribution
    return tracing.invoke_agent(c.agent, name=c.display_name or c.agent_key, agent_id=c.agent_key)


def in_agent_thread(work, ctx: RunContext, slot: Slot, permits: threading.BoundedSemaphore):
    _fresh_connection()
    try:
        with permits, specialist_span(slot):
            work(ctx, slot)
    except Exception:
        # The connection may be broken (e.g. the server restarted): start clean next time.
        connection.close()
        raise
    finally:
        _thread_state.last_used = time.monotonic()
        if _pooled():
            # A pooled connection goes back after each agent (cheap): kept per thread, the pool's
            # few connections were soon all held by idle agent threads, and the next agent
            # waited DATABASE_POOL_TIMEOUT and failed.
            connection.close()
        elif ctx.stop.is_set() and _idle():
            # An orphan (a cancelled agent whose call outlived its session, or a timed-out one)
            # that ends after the last session: the idle close already passed this thread by.
            connection.close()


def _pooled() -> bool:
    return bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))


def _idle() -> bool:
    with _pool_lock:
        return _active_sessions == 0


def close_thread_connections(timeout: float = 10.0) -> None:
    """Close the database connections of the idle agent threads (tests, before dropping a DB)."""
    with _pool_lock:
        pool = _pool if _pool_pid == os.getpid() else None
    if pool is None:
        return
    count = len(pool._threads)
    if not count or pool._work_queue.qsize():
        return
    # Each thread takes exactly one task: having closed its connection it waits at the barrier.
    barrier = threading.Barrier(count)

    def close():
        connection.close()
        try:
            barrier.wait(timeout)
        except threading.BrokenBarrierError:
            pass

    wait([pool.submit(close) for _ in range(count)], timeout=timeout + 1)


def session_started() -> None:
    global _active_sessions, _generation
    with _pool_lock:
        _active_sessions += 1
        _generation += 1


def session_ended() -> None:
    global _active_sessions
    with _pool_lock:
        _active_sessions -= 1
        idle, generation = _active_sessions == 0, _generation
    if not idle:
        return
    idle_close = float(settings.COLLAB_IDLE_CLOSE_SECONDS)
    if idle_close <= 0:
        close_thread_connections(timeout=2.0)
        return

    def close_if_still_idle():
        with _pool_lock:
            still_idle = _active_sessions == 0 and _generation == generation
        if still_idle:
            close_thread_connections(timeout=2.0)

    timer = threading.Timer(idle_close, close_if_still_idle)
    timer.daemon = True
    timer.start()
