"""Running test jobs truly at once, each on its own database connection."""

import threading
from concurrent.futures import ThreadPoolExecutor

from django.db import connection


def run_at_once(jobs):
    """Run the callables together (a barrier releases them at once); each closes its connection."""
    barrier = threading.Barrier(len(jobs))

    def run(job):
        try:
            barrier.wait(timeout=30)
            return job()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return list(pool.map(run, jobs))
