"""infrastructure/atomic.py: a service directly inside a block its caller undoes whole opens no
savepoint; anywhere else, and deeper inside, savepoints are as Django makes them."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from infrastructure.atomic import atomic, undone_whole
from infrastructure.errors import Conflict
from organization.models import Organization, Team

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def acme(db):
    return Organization.objects.create(slug="acme", name="Acme")


def savepoints(captured) -> int:
    return sum(q["sql"].startswith("SAVEPOINT") for q in captured.captured_queries)


@atomic
def make_team(org, name: str, *, refuse: bool = False) -> Team:
    team = Team.objects.create(organization=org, name=name)
    if refuse:
        raise Conflict("refused after writing", "test_refused")
    return team


@atomic
def make_team_tolerating_a_duplicate(org, name: str) -> str:
    """A service that catches a database error in a nested block and goes on."""
    try:
        with transaction.atomic():
            Team.objects.create(organization=org, name=name)
    except IntegrityError:
        pass
    return Team.objects.get(organization=org, name=name).name


def test_inside_undone_whole_the_service_opens_no_savepoint(acme):
    with CaptureQueriesContext(connection) as sent, undone_whole():
        make_team(acme, "Platform")
    assert savepoints(sent) == 0
    assert Team.objects.filter(organization=acme, name="Platform").exists()


def test_a_refusal_inside_undone_whole_undoes_the_whole_transaction(acme):
    with pytest.raises(Conflict), undone_whole():
        Team.objects.create(organization=acme, name="Before")
        make_team(acme, "Refused", refuse=True)
    assert not Team.objects.filter(name__in=["Before", "Refused"]).exists()


def test_elsewhere_the_service_keeps_its_savepoint_and_a_caught_refusal_keeps_the_rest(acme):
    with CaptureQueriesContext(connection) as sent, transaction.atomic():
        Team.objects.create(organization=acme, name="Kept")
        with pytest.raises(Conflict):
            make_team(acme, "Refused", refuse=True)
    assert savepoints(sent) == 1
    assert Team.objects.filter(name="Kept").exists()
    assert not Team.objects.filter(name="Refused").exists()


def test_blocks_nested_deeper_keep_their_savepoints(acme):
    Team.objects.create(organization=acme, name="Twice")
    with CaptureQueriesContext(connection) as sent, undone_whole():
        assert make_team_tolerating_a_duplicate(acme, "Twice") == "Twice"
        make_team(acme, "After")  # the next service is again the first inside the block
    assert savepoints(sent) == 1  # the nested block's, which the IntegrityError rolled back to
    assert Team.objects.filter(organization=acme, name="After").exists()
