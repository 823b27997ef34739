"""API keys (hashed at rest, revocable), who a key acts as, and session auth for admin members."""

import hashlib

import pytest
from django.db import connection

from organization.models import ApiKey
from organization.services import api_key_create, api_key_revoke
from tests.conftest import KeyClient, agent_of
from tests.factories import make_admin_user, make_org

pytestmark = pytest.mark.django_db


def test_keys_are_hashed_at_rest(demo):
    _, plaintext = api_key_create(organization=demo, agent=agent_of(demo, "agent-sarah"))
    secret = plaintext.split("_", 2)[2]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiKey._meta.db_table}")
        stored = " ".join(str(value) for row in cursor.fetchall() for value in row)
    assert plaintext not in stored
    assert secret not in stored
    assert hashlib.sha256(secret.encode()).hexdigest() in stored


def test_a_revoked_key_is_401(demo):
    key, plaintext = api_key_create(organization=demo, agent=agent_of(demo, "agent-sarah"))
    client = KeyClient(plaintext)
    assert client.get("/api/roster").status_code == 200
    api_key_revoke(key=key)
    response = client.get("/api/roster")
    assert response.status_code == 401
    assert response.json() == {
        "success": False,
        "error": "Invalid or revoked API key.",
        "code": "authentication_failed",
    }


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Token abc", "Bearer ao_x", "Bearer not-a-key", "Bearer a b"],
)
def test_a_malformed_authorization_header_is_401(demo, anon_client, header):
    anon_client.credentials(HTTP_AUTHORIZATION=header)
    response = anon_client.get("/api/roster")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


def test_a_key_with_the_right_prefix_but_a_wrong_secret_is_401(demo):
    _, plaintext = api_key_create(organization=demo)
    forged = plaintext[: plaintext.rindex("_") + 1] + "x" * 43
    assert KeyClient(forged).get("/api/roster").status_code == 401


def test_without_credentials_it_is_401_with_a_bearer_challenge(demo, anon_client):
    response = anon_client.get("/api/agents")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_required"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_an_agent_key_acts_as_its_agent(demo, agent_client):
    body = agent_client(agent_of(demo, "agent-jordan")).get("/api/roster").json()
    assert body["agent_context"]["id"] == "agent-jordan"
    assert "agent-jordan" not in [c["id"] for c in body["colleagues"]]


def test_an_organization_key_acts_as_a_human_admin(demo, org_client):
    client = org_client(demo)
    body = client.get("/api/roster").json()
    assert body["agent_context"] is None
    assert len(body["colleagues"]) == 7
    response = client.post(
        "/api/team/roles", {"agent_id": "agent-alex", "role": "specialist"}, format="json"
    )
    assert response.status_code == 201


def test_the_key_records_its_last_use(demo):
    key, plaintext = api_key_create(organization=demo)
    assert key.last_used_at is None
    KeyClient(plaintext).get("/api/roster")
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_a_logged_in_admin_member_uses_the_api_and_the_browsable_api(demo, anon_client):
    anon_client.force_login(make_admin_user(demo))
    assert anon_client.get("/api/roster").json()["agent_context"] is None
    page = anon_client.get("/api/agents", HTTP_ACCEPT="text/html")
    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/html")
    assert b"agent-sarah" in page.content


def test_a_logged_in_user_who_is_not_an_admin_member_is_403(demo, anon_client):
    anon_client.force_login(make_admin_user(None))
    response = anon_client.get("/api/roster")
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"


def test_a_member_who_is_not_admin_is_403(demo, anon_client):
    user = make_admin_user(None)
    user.memberships.create(organization=demo, is_admin=False)
    anon_client.force_login(user)
    assert anon_client.get("/api/roster").status_code == 403


def test_a_member_of_two_organizations_chooses_with_x_organization(demo, anon_client):
    other = make_org("second")
    user = make_admin_user(demo)
    user.memberships.create(organization=other, is_admin=True)
    anon_client.force_login(user)
    # Two organizations and none named: the caller is ambiguous, so refused.
    assert anon_client.get("/api/agents").status_code == 403
    chosen = anon_client.get("/api/agents", HTTP_X_ORGANIZATION="demo")
    assert chosen.status_code == 200
    assert chosen.json()["count"] == 7
    assert anon_client.get("/api/agents", HTTP_X_ORGANIZATION="second").json()["count"] == 0


def test_an_x_organization_with_a_nul_character_names_no_organization(demo, anon_client):
    """The slug goes into a query: PostgreSQL refuses NUL in text, which was a 500 for a
    logged-in member instead of the 403 of a slug that names none of their organizations."""
    anon_client.force_login(make_admin_user(demo))
    response = anon_client.get("/api/agents", HTTP_X_ORGANIZATION="de\x00mo")
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
