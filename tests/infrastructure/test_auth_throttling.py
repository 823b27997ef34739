"""Failed authentication is throttled per client address (infrastructure/throttling.py): every
401 of /api/ and /mcp counts, past AUTH_FAILURE_LIMIT the address answers 429
`authentication_throttled` with Retry-After; and the admin login locks out after
ADMIN_LOGIN_FAILURE_LIMIT failures (django-axes)."""

import itertools
import random

import pytest
from django.contrib.auth import get_user_model

from infrastructure import throttling
from tests.conftest import KeyClient
from tests.factories import make_agent, make_key, make_org
from tests.organization.mcp.live import LiveServer, raw_http

BAD_KEY = "ao_000000000000_not-a-real-secret"
_addresses = itertools.count(random.randrange(2**23))


def an_address() -> str:
    """An address of its own: the counter lives in the cache, shared by the whole run."""
    n = next(_addresses)
    return f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"


@pytest.fixture
def limit(settings):
    settings.AUTH_FAILURE_LIMIT = 3
    settings.AUTH_FAILURE_WINDOW_SECONDS = 120
    return 3


@pytest.fixture
def good_key(db):
    org = make_org("acme")
    return make_key(org, make_agent(org, "agent-sarah"))


def test_bad_keys_from_one_address_are_429_past_the_limit(limit, good_key):
    address, elsewhere = an_address(), an_address()
    client = KeyClient(BAD_KEY)
    for _ in range(limit):
        assert client.get("/api/roster", REMOTE_ADDR=address).status_code == 401
    refused = client.get("/api/roster", REMOTE_ADDR=address)
    assert refused.status_code == 429
    assert refused.json()["success"] is False
    assert refused.json()["code"] == "authentication_throttled"
    assert "AUTH_FAILURE_LIMIT" in refused.json()["error"]
    assert 0 < int(refused["Retry-After"]) <= 120

    # The address is refused before any key is looked up, a good one too; others go on.
    assert KeyClient(good_key).get("/api/roster", REMOTE_ADDR=address).status_code == 429
    assert KeyClient(good_key).get("/api/roster", REMOTE_ADDR=elsewhere).status_code == 200
    assert client.get("/api/roster", REMOTE_ADDR=elsewhere).status_code == 401


def test_a_server_process_that_never_saw_the_address_fail_learns_it_from_one_401(limit, good_key):
    """Only addresses this process answered a 401 are looked up in the cache (a request from
    any other costs no round trip): another process lets one request through, then refuses."""
    address = an_address()
    client = KeyClient(BAD_KEY)
    for _ in range(limit):
        assert client.get("/api/roster", REMOTE_ADDR=address).status_code == 401
    assert client.get("/api/roster", REMOTE_ADDR=address).status_code == 429
    throttling._FAILED_HERE.clear()  # as a process that served none of them
    assert client.get("/api/roster", REMOTE_ADDR=address).status_code == 401
    assert KeyClient(good_key).get("/api/roster", REMOTE_ADDR=address).status_code == 429


def test_what_a_process_remembers_of_failed_addresses_is_bounded(limit, db, monkeypatch):
    monkeypatch.setattr(throttling, "FAILED_HERE_MAX", 3)
    throttling._FAILED_HERE.clear()
    addresses = [an_address() for _ in range(5)]
    for address in addresses:
        assert KeyClient(BAD_KEY).get("/api/roster", REMOTE_ADDR=address).status_code == 401
    assert list(throttling._FAILED_HERE) == addresses[2:]


def test_requests_without_a_key_count_too(limit, db):
    address = an_address()
    for _ in range(limit):
        assert KeyClient().get("/api/tasks", REMOTE_ADDR=address).status_code == 401
    assert KeyClient().get("/api/tasks", REMOTE_ADDR=address).status_code == 429


def test_a_good_key_does_not_count(limit, good_key):
    address = an_address()
    for _ in range(limit * 2):
        assert KeyClient(good_key).get("/api/roster", REMOTE_ADDR=address).status_code == 200
    assert KeyClient(BAD_KEY).get("/api/roster", REMOTE_ADDR=address).status_code == 401


def test_zero_turns_it_off(settings, db):
    settings.AUTH_FAILURE_LIMIT = 0
    address = an_address()
    for _ in range(5):
        assert KeyClient(BAD_KEY).get("/api/roster", REMOTE_ADDR=address).status_code == 401


@pytest.mark.django_db(transaction=True)
def test_mcp_counts_with_rest_and_refuses_past_the_limit(limit, good_key):
    address, elsewhere = an_address(), an_address()
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    accept = "application/json, text/event-stream"
    with LiveServer() as server, raw_http(server.url) as http:
        # uvicorn takes the client's address from X-Forwarded-For of a trusted proxy (127.0.0.1).
        def post(key, at):
            headers = {"X-Forwarded-For": at, "Accept": accept}
            if key:
                headers["Authorization"] = f"Bearer {key}"
            return http.post("/mcp", json=ping, headers=headers)

        assert KeyClient(BAD_KEY).get("/api/roster", REMOTE_ADDR=address).status_code == 401
        assert post(None, address).status_code == 401
        assert post(BAD_KEY, address).status_code == 401
        refused = post(good_key, address)
        assert refused.status_code == 429
        assert refused.json()["code"] == "authentication_throttled"
        assert refused.json()["error"]["data"] == {
            "code": "authentication_throttled",
            "status": 429,
        }
        assert int(refused.headers["retry-after"]) > 0
        assert KeyClient(good_key).get("/api/roster", REMOTE_ADDR=address).status_code == 429
        assert post(good_key, elsewhere).status_code == 200


# --- the admin login (django-axes) -----------------------------------------------------------


@pytest.fixture
def admin_user(db):
    return get_user_model().objects.create_superuser("boss", "boss@example.com", "right-pass")


def log_in(client, password, address):
    return client.post(
        "/admin/login/?next=/admin/",
        {"username": "boss", "password": password},
        REMOTE_ADDR=address,
    )


def test_the_admin_login_locks_out_after_repeated_failures(client, admin_user, settings):
    settings.AXES_FAILURE_LIMIT = 4
    address, elsewhere = an_address(), an_address()
    for _ in range(3):
        failed = log_in(client, "wrong", address)
        assert failed.status_code == 200  # the form again, with its error
    locked = log_in(client, "wrong", address)
    assert locked.status_code == 429
    # Locked: the right password from that address is refused too.
    assert log_in(client, "right-pass", address).status_code == 429
    assert "_auth_user_id" not in client.session
    # Another address logs in.
    welcome = log_in(client, "right-pass", elsewhere)
    assert welcome.status_code == 302
    assert client.session["_auth_user_id"] == str(admin_user.pk)
