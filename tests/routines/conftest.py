"""The routines' cast: the runtime tests' organization (Lena leads Alex and Sarah in Development,
Morgan and Sam in Ops), and helpers to make and fire routines through the API."""

import pytest

from tests.conftest import KeyClient
from tests.factories import make_key
from tests.runtime.conftest import Cast


class RoutineCast(Cast):
    def __init__(self):
        super().__init__()
        self.org_key = make_key(self.org)

    @property
    def client(self) -> KeyClient:
        """The organization key's client (a human administrator)."""
        return KeyClient(self.org_key)

    def agent_client(self, agent) -> KeyClient:
        return KeyClient(make_key(self.org, agent))

    def routine(self, **fields) -> dict:
        """A routine made through the API (owned by Development, every hour, unless said)."""
        body = {"title": "Dependency review", "required_expertise": "PostgreSQL"}
        if "agent" not in fields:
            body["team"] = "Development"
        if "interval_seconds" not in fields:
            body["cron"] = "0 * * * *"
        response = self.client.post("/api/routines", {**body, **fields}, format="json")
        assert response.status_code == 201, response.content
        return response.json()

    def run(self, routine: dict):
        return self.client.post(f"/api/routines/{routine['id']}/run", format="json")

    def occurrences(self, routine: dict) -> list[dict]:
        response = self.client.get(f"/api/routines/{routine['id']}/occurrences")
        assert response.status_code == 200, response.content
        return response.json()["results"]


@pytest.fixture
def cast(db):
    return RoutineCast()


def assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["success"] is False and body["code"] == code, body
