"""One bearer parser (organization.auth.bearer_token) for every HTTP door: REST and /mcp."""

import pytest

from organization.auth import bearer_token
from tests.conftest import agent_of
from tests.factories import make_key

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer ao_x_y", "ao_x_y"),
        ("bearer ao_x_y", "ao_x_y"),
        ("  Bearer   ao_x_y  ", "ao_x_y"),
        ("Bearer", None),
        ("Bearer a b", None),
        ("Token abc", None),
        ("", None),
    ],
)
def test_the_token_of_an_authorization_header(header, token):
    assert bearer_token(header) == token


def test_rest_accepts_the_scheme_in_any_case_as_mcp_does(demo, anon_client):
    plaintext = make_key(demo, agent_of(demo, "agent-sarah"))
    anon_client.credentials(HTTP_AUTHORIZATION=f"bearer {plaintext}")
    assert anon_client.get("/api/roster").status_code == 200


@pytest.mark.parametrize("token", ["ao_ab\x00cd_secret", "ao_abcd_se\x00cret", "\x00"])
def test_a_token_with_a_nul_character_is_401_not_500(demo, token):
    """The key's prefix goes into a query: PostgreSQL refuses NUL in text, which was a 500
    (`DataError`) instead of the 401 any other unknown key gets, on every door that
    authenticates through `authenticate_key`."""
    from django.test import Client

    from organization.auth import authenticate_key

    assert authenticate_key(token) is None
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/roster")
    assert response.status_code == 401
    assert response.json() == {
        "success": False,
        "error": "Invalid or revoked API key.",
        "code": "authentication_failed",
    }
