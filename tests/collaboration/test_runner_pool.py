"""Agent threads and psycopg's pool: a thread gives its connection back after each agent.

Kept per thread (as persistent connections were), the pool's connections were soon all held by
idle agent threads of a Celery worker, and the next agent waited DATABASE_POOL_TIMEOUT and
failed — found by bench/collaboration.py (its 7th sequential session).
"""

import threading
from types import SimpleNamespace

import pytest
from django.db import connection

from collaboration.runner.pool import in_agent_thread

pooled = bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))


@pytest.mark.skipif(not pooled, reason="psycopg's pool is PostgreSQL's default (CI runs it)")
@pytest.mark.django_db(transaction=True)
def test_an_agent_thread_returns_its_pooled_connection_after_each_agent():
    seen = {}

    def work(ctx, slot):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        seen["held during the agent"] = connection.connection is not None

    def agent_thread():
        ctx = SimpleNamespace(stop=threading.Event())
        in_agent_thread(work, ctx, None, threading.BoundedSemaphore(1))
        seen["held after it"] = connection.connection is not None

    thread = threading.Thread(target=agent_thread)
    thread.start()
    thread.join(timeout=30)
    assert seen == {"held during the agent": True, "held after it": False}
