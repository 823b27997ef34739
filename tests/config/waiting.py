"""Waiting on a process the tests started: poll until a condition holds, with a deadline."""

import time


def wait_for(predicate, seconds: float, what: str, every: float = 0.2):
    """The first truthy value of `predicate()`, polled every `every` seconds; fails after
    `seconds` naming `what`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")
