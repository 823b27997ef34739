"""The suite's flush after a transactional test (tests/conftest.py): every row a test made is
gone, and the rows post_migrate makes are there as a fresh database has them — kept when the
test left them alone, made again when it changed them."""

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.test import TransactionTestCase
from django_celery_beat.models import PeriodicTask

from organization.models import Organization
from tests.factories import make_org


def flush():
    test_case = TransactionTestCase()
    test_case.databases = {"default"}
    test_case._fixture_teardown()


def made_by_post_migrate():
    return (
        sorted(ContentType.objects.values_list("app_label", "model")),
        sorted(Permission.objects.values_list("codename", flat=True)),
        sorted(PeriodicTask.objects.values_list("name", "task", "enabled")),
    )


pytestmark = pytest.mark.django_db(transaction=True)


def test_untouched_seeded_rows_are_kept_and_the_tests_rows_are_gone():
    flush()  # the fingerprint of a fresh database
    seeded = made_by_post_migrate()
    schedule_ids = sorted(PeriodicTask.objects.values_list("pk", flat=True))
    make_org("leftover")

    flush()

    assert not Organization.objects.exists()
    assert made_by_post_migrate() == seeded
    assert sorted(PeriodicTask.objects.values_list("pk", flat=True)) == schedule_ids


@pytest.mark.parametrize(
    "change",
    [
        lambda: PeriodicTask.objects.update(enabled=False),
        lambda: PeriodicTask.objects.all().delete(),
        lambda: Permission.objects.filter(codename__startswith="view_").delete(),
        lambda: ContentType.objects.create(app_label="stray", model="thing"),
    ],
    ids=["schedule disabled", "schedules deleted", "permissions deleted", "content type added"],
)
def test_seeded_rows_a_test_changed_are_made_again(change):
    flush()
    seeded = made_by_post_migrate()
    change()
    assert made_by_post_migrate() != seeded

    flush()

    assert made_by_post_migrate() == seeded
