"""The worker's event loop wakes when a pool thread queues work for it (config/celery.py).

Under `-P threads` a late ack is queued for the loop from the thread that ran the task; without
the wake-up it waits for the loop's next timer, and a worker at its prefetch limit takes nothing.
"""

import os
import threading

from kombu.asynchronous import Hub
from kombu.asynchronous.timer import Timer

from config.celery import WakeTheLoop, app

DEADLINE_SECONDS = 5.0  # well under a quiet loop's 10 s poll, well over a wake-up


class QuietWorkerLoop:
    """A worker's event loop on a thread of its own, as the worker makes it: the hub's timer
    lets a quiet loop poll for up to 10 s, a broker socket has nothing to read, the next timer
    is far off. `reset_once` restarts the loop first, as a broker reconnect does."""

    def __init__(self, *, reset_once: bool = False):
        self.hub = Hub(timer=Timer(max_interval=10.0))
        self.step = WakeTheLoop(None)
        self.broker = os.pipe()
        self.polling = threading.Event()
        self.stopped = False
        self.reset_once = reset_once
        self.wrapped_twice = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        hub = self.hub
        self.step.register_with_event_loop(None, hub)
        if self.reset_once:
            wrapped = hub.call_soon
            hub.reset()
            self.step.register_with_event_loop(None, hub)
            self.wrapped_twice = hub.call_soon is not wrapped
        hub.add_reader(self.broker[0], lambda: None)
        hub.call_later(60, lambda: None)
        # Runs on the loop's first turn, before its first poll: from then on a callback queued
        # by another thread waits for that poll to end.
        hub.call_soon(self.polling.set)
        loop = hub.create_loop()
        while not self.stopped:
            next(loop)

    def __enter__(self):
        self.thread.start()
        assert self.polling.wait(DEADLINE_SECONDS)
        return self

    def __exit__(self, *exc) -> None:
        self.stopped = True
        self.hub.call_soon(lambda: None)
        self.thread.join(DEADLINE_SECONDS)
        self.step.shutdown(None)
        for fd in self.broker:
            os.close(fd)


def test_a_callback_queued_by_another_thread_runs_at_once():
    with QuietWorkerLoop() as worker:
        acked = threading.Event()
        worker.hub.call_soon(acked.set)  # as a pool thread queues a finished task's ack
        assert acked.wait(DEADLINE_SECONDS), "the loop slept through a callback queued for it"


def test_a_restarted_loop_is_woken_too():
    """The consumer registers its steps again whenever its loop restarts (a broker reconnect)."""
    with QuietWorkerLoop(reset_once=True) as worker:
        acked = threading.Event()
        worker.hub.call_soon(acked.set)
        assert acked.wait(DEADLINE_SECONDS)
        assert worker.wrapped_twice is False
        assert worker.step.read_end in worker.hub.readers


def test_the_worker_runs_the_step():
    assert WakeTheLoop in app.steps["consumer"]
