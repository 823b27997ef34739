"""`POST /api/routines/<id>/trigger`: no key, a signature of "<timestamp>.<body>" with the
routine's secret; a bad or old one is 401 `invalid_signature` and creates nothing."""

import hashlib
import hmac
import time

import pytest
from rest_framework.test import APIClient

from routines import services
from routines.models import Occurrence, Routine
from tasks.models import Task
from tests.infrastructure.test_throttling import (  # noqa: F401  (a fixture)
    assert_rate_limited,
    fresh_counters,
)

from .conftest import assert_error

pytestmark = pytest.mark.django_db
BODY = b'{"event": "ci_failed", "build": 1234}'


def signed(secret: str, body: bytes = BODY, at: int | None = None) -> dict:
    timestamp = str(int(time.time()) if at is None else at)
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return {
        "HTTP_X_AGENT_ORG_TIMESTAMP": timestamp,
        "HTTP_X_AGENT_ORG_SIGNATURE": f"sha256={mac.hexdigest()}",
    }


def trigger(routine_id, headers: dict, body: bytes = BODY):
    return APIClient().post(
        f"/api/routines/{routine_id}/trigger", body, content_type="application/json", **headers
    )


def test_a_signed_call_creates_the_occurrence(cast):
    made = cast.routine()
    response = trigger(made["id"], signed(made["webhook_secret"]))
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["outcome"] == "created"
    assert Task.objects.get(pk=body["task"]).assignee == cast.alex
    assert Occurrence.objects.get().source == "trigger"


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda h: {**h, "HTTP_X_AGENT_ORG_SIGNATURE": "sha256=" + "0" * 64}, id="bad"),
        pytest.param(lambda h: {k: v for k, v in h.items() if "SIGNATURE" not in k}, id="none"),
        pytest.param(lambda h: {k: v for k, v in h.items() if "TIMESTAMP" not in k}, id="no-time"),
        pytest.param(
            lambda h: {
                **h,
                "HTTP_X_AGENT_ORG_TIMESTAMP": str(int(h["HTTP_X_AGENT_ORG_TIMESTAMP"]) + 1),
            },
            id="other-time",
        ),
        pytest.param(lambda h: {**h, "HTTP_X_AGENT_ORG_TIMESTAMP": "１２"}, id="not-ascii"),
    ],
)
def test_a_bad_signature_is_401_and_creates_nothing(cast, tamper):
    made = cast.routine()
    response = trigger(made["id"], tamper(signed(made["webhook_secret"])))
    assert_error(response, 401, "invalid_signature")
    assert not Task.objects.exists() and not Occurrence.objects.exists()


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b'{"build":   1234,\n  "note": "caf\xc3\xa9"}  ', "application/json"),
        (b"\xff\xfe not text at all", "application/octet-stream"),
        (b"", "text/plain"),
    ],
)
def test_the_raw_body_bytes_are_what_is_signed(cast, body, content_type):
    made = cast.routine()
    response = APIClient().post(
        f"/api/routines/{made['id']}/trigger",
        body,
        content_type=content_type,
        **signed(made["webhook_secret"], body),
    )
    assert response.status_code == 201, response.content


def test_another_body_than_the_signed_one_is_401(cast):
    made = cast.routine()
    response = trigger(made["id"], signed(made["webhook_secret"]), body=b'{"build": 1235}')
    assert_error(response, 401, "invalid_signature")


@pytest.mark.parametrize("age", [301, -301])
def test_a_timestamp_more_than_300_seconds_away_is_401(cast, age):
    made = cast.routine()
    old = signed(made["webhook_secret"], at=int(time.time()) - age)
    assert_error(trigger(made["id"], old), 401, "invalid_signature")
    assert not Task.objects.exists()


def test_a_timestamp_within_300_seconds_is_accepted(cast):
    made = cast.routine()
    recent = signed(made["webhook_secret"], at=int(time.time()) - 250)
    assert trigger(made["id"], recent).status_code == 201


def test_another_routines_secret_or_an_unknown_routine_is_401(cast):
    made, other = cast.routine(title="a"), cast.routine(title="b")
    assert_error(trigger(made["id"], signed(other["webhook_secret"])), 401, "invalid_signature")
    assert_error(trigger(999_999, signed(made["webhook_secret"])), 401, "invalid_signature")


def test_a_rotated_secret_stops_the_old_one_at_once(cast):
    made = cast.routine()
    new = services.routine_rotate_secret(routine=Routine.objects.get(pk=made["id"]))
    assert new != made["webhook_secret"]
    assert_error(trigger(made["id"], signed(made["webhook_secret"])), 401, "invalid_signature")
    assert trigger(made["id"], signed(new)).status_code == 201


def test_a_signed_call_is_good_once(cast):
    made = cast.routine(concurrency="allow")
    captured = signed(made["webhook_secret"])
    assert trigger(made["id"], captured).status_code == 201
    # Replayed within its 300 s, it is refused as a bad signature is.
    assert_error(trigger(made["id"], captured), 401, "invalid_signature")
    assert Task.objects.count() == 1
    # Another call (another body, or a later timestamp) is signed anew.
    other = b'{"event": "ci_failed", "build": 1235}'
    assert trigger(made["id"], signed(made["webhook_secret"], other), other).status_code == 201


def test_concurrency_applies_to_the_trigger(cast):
    made = cast.routine()
    first, second = b'{"build": 1}', b'{"build": 2}'
    assert trigger(made["id"], signed(made["webhook_secret"], first), first).status_code == 201
    response = trigger(made["id"], signed(made["webhook_secret"], second), second)
    assert_error(response, 409, "routine_busy")
    assert Task.objects.count() == 1


def test_an_api_key_is_no_signature(cast):
    made = cast.routine()
    response = cast.client.post(f"/api/routines/{made['id']}/trigger", {}, format="json")
    assert_error(response, 401, "invalid_signature")


def test_a_sender_past_the_rate_is_429_and_unsigned_calls_use_none_of_it(
    cast,
    settings,
    fresh_counters,  # noqa: F811  (the fixture imported above)
):
    settings.API_THROTTLE_RATE = "2/min"
    made = cast.routine(concurrency="allow")
    for _ in range(3):
        assert_error(trigger(made["id"], {}), 401, "invalid_signature")
    bodies = [f'{{"build": {n}}}'.encode() for n in range(3)]
    for body in bodies[:2]:
        assert trigger(made["id"], signed(made["webhook_secret"], body), body).status_code == 201
    assert_rate_limited(trigger(made["id"], signed(made["webhook_secret"], bodies[2]), bodies[2]))
    assert Task.objects.count() == 2


def test_a_disabled_routines_webhook_creates_nothing_but_a_run_does(cast):
    made = cast.routine(enabled=False, concurrency="allow")
    assert_error(trigger(made["id"], signed(made["webhook_secret"])), 409, "routine_disabled")
    assert not Task.objects.exists()
    assert cast.run(made).json()["outcome"] == "created"
