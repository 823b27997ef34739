"""GET /api/runs: bad query params are never a 500; another organization's run is a 404."""

import pytest

from runtime.models import Run
from tests.conftest import KeyClient
from tests.factories import make_key

pytestmark = pytest.mark.django_db(transaction=True)

BAD = [
    "agent=%00",
    "agent=a%00b",
    "agent=%ED%A0%80",
    "task=%00",
    "task=-1",
    "task=99999999999999999999",
    "task=1.5",
    "status=%00",
    "trigger=%00",
    "page=0",
    "page=%00",
    "page=99999999999999999999",
    "page_size=-1",
    "page_size=%00",
    "page_size=99999999999999999999",
    "limit=%00",
    "offset=%00",
    "cursor=%00",
    "ordering=%00",
    "agent=" + "a" * 5000,
    "task=0x10",
    "task=%EF%BC%91",
]


@pytest.mark.parametrize("query", BAD)
def test_bad_params_are_not_a_500(cast, query):
    client = KeyClient(make_key(cast.org))
    response = client.get("/api/runs?" + query)
    assert response.status_code < 500, (query, response.status_code, response.content[:300])


@pytest.mark.parametrize("path", ["%00", "1%00", "-1", "99999999999999999999", "1.0", "%EF%BC%91"])
def test_bad_ids_are_not_a_500(cast, path):
    client = KeyClient(make_key(cast.org))
    response = client.get("/api/runs/" + path)
    assert response.status_code < 500, (path, response.status_code, response.content[:300])


def test_another_organizations_run_is_a_404(cast):
    run = Run.objects.create(
        organization=cast.other, agent=cast.bob, trigger="created", status="completed"
    )
    for key in (make_key(cast.org), make_key(cast.org, cast.alex)):
        client = KeyClient(key)
        assert client.get(f"/api/runs/{run.pk}").status_code == 404
        assert client.get("/api/runs", {"agent": "agent-bob"}).json()["results"] == []
    mine = Run.objects.create(
        organization=cast.org, agent=cast.lena, trigger="created", status="completed"
    )
    assert KeyClient(make_key(cast.org, cast.alex)).get(f"/api/runs/{mine.pk}").status_code == 404
