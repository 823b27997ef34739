"""What the suite's broker use leaves in its Redis database, deleted at the end of a run
(tests/conftest.py) and checked by CI (`python -m tests.broker_keys REDIS_URL`): kombu's
bindings, the queues of messages published to tasks no worker runs (the outbox's tests; a
priority's queue is `celery\\x06\\x16N`) and the ack bookkeeping. The throttle's cache keys
expire on their own.
"""

import sys

import redis

PATTERNS = ("_kombu.binding.*", "celery", "celery\x06\x16*", "unacked*")


def broker_keys(client: redis.Redis) -> list[bytes]:
    return [key for pattern in PATTERNS for key in client.scan_iter(match=pattern)]


def delete_broker_keys(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        if keys := broker_keys(client):
            client.delete(*keys)
    except redis.RedisError:
        pass  # a test stopped Redis, or it went away: nothing to clean, the run's result stands
    finally:
        client.close()


if __name__ == "__main__":
    left = broker_keys(redis.Redis.from_url(sys.argv[1]))
    sys.exit(f"the test suite left broker keys in Redis: {left}" if left else 0)
