"""The Celery app (cookiecutter-django's layout), and a wake-up for the worker's event loop."""

import os
import threading

from celery import Celery, bootsteps, signals

if not os.environ.get("DJANGO_SETTINGS_MODULE", "").strip():  # unset or empty: the default
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"

app = Celery("agent_org")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.worker_init.connect
@signals.worker_process_init.connect
def start_tracing(**kwargs) -> None:
    """Traces, when OTEL_EXPORTER_OTLP_ENDPOINT is set: in the worker, and again in each child a
    prefork pool forks (set up once per process; the span exporter's thread survives a fork)."""
    from infrastructure.tracing import setup

    setup()


@signals.worker_init.connect
def wait_longer_for_connections(**kwargs) -> None:
    """A worker's threads wait WORKER_DATABASE_POOL_TIMEOUT for a pooled connection (set before
    the pool is made, at the first query): a burst of runs queues rather than fails."""
    from django.conf import settings

    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):
        pool["timeout"] = settings.WORKER_DATABASE_POOL_TIMEOUT


class WakeTheLoop(bootsteps.StartStopStep):
    """Wakes the worker's event loop when a pool thread hands it work (celery/celery#6941): under
    `-P threads` a late ack waits for the loop's next wake-up, and a worker at its prefetch limit
    takes nothing until then. A pipe the loop reads gets a byte at every queued callback."""

    def __init__(self, parent, **kwargs):
        super().__init__(parent, **kwargs)
        self.read_end, self.write_end = os.pipe()
        os.set_blocking(self.read_end, False)
        os.set_blocking(self.write_end, False)

    def register_with_event_loop(self, parent, hub) -> None:
        """Called each time the consumer's loop (re)starts, on the loop's thread."""
        hub.add_reader(self.read_end, self.drain)
        if getattr(hub, "woken_by", None) is not self:
            wake_on_call_soon(hub, self.wake, loop_thread=threading.get_ident())
            hub.woken_by = self

    def wake(self) -> None:
        try:
            os.write(self.write_end, b"!")
        except BlockingIOError:
            pass  # the pipe is full: the loop has a wake-up pending already

    def drain(self) -> None:
        try:
            while os.read(self.read_end, 4096):
                pass
        except BlockingIOError:
            pass

    def shutdown(self, parent) -> None:
        for fd in (self.read_end, self.write_end):
            try:
                os.close(fd)
            except OSError:
                pass


def wake_on_call_soon(hub, wake, *, loop_thread: int) -> None:
    """Make `hub.call_soon` call `wake()` when it is called from a thread other than the loop's."""
    queue_callback = hub.call_soon

    def call_soon(callback, *args):
        handle = queue_callback(callback, *args)
        if threading.get_ident() != loop_thread:
            wake()
        return handle

    hub.call_soon = call_soon


app.steps["consumer"].add(WakeTheLoop)
