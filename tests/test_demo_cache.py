"""The `demo` fixture's copy of seed_demo (tests/demo_cache.py) is what seed_demo makes."""

from datetime import datetime

import pytest
from django.db import transaction

from tasks.demo import seed_demo
from tests import demo_cache

pytestmark = pytest.mark.django_db


def every_row() -> dict:
    return {model._meta.label: demo_cache._rows(model) for model in demo_cache._models()}


def made_by(play) -> dict:
    with transaction.atomic():
        play()
        rows = every_row()
        transaction.set_rollback(True)
    return rows


def test_the_copy_has_every_row_and_value_seed_demo_makes_and_only_the_clock_moves():
    taken = {}

    def seed():
        before = demo_cache._table_state()
        taken["copy"] = demo_cache._take(before, seed_demo(slug="demo"))

    seeded = made_by(seed)
    assert taken["copy"] is not None, "seed_demo changed something a copy cannot repeat"
    copied = made_by(lambda: demo_cache._insert(taken["copy"]))

    assert seeded.keys() == copied.keys()
    shifts = set()
    for label, rows in seeded.items():
        assert rows.keys() == copied[label].keys(), label
        for pk, row in rows.items():
            again = copied[label][pk]
            for value, copy in zip(row, again, strict=True):
                if isinstance(value, datetime) and value != copy:
                    shifts.add(copy - value)
                else:
                    assert copy == value, (label, pk)
    assert len(shifts) == 1 and shifts.pop().total_seconds() > 0


def test_the_demo_fixture_is_the_demo_organization(demo):
    assert demo.slug == "demo"
    assert demo.agents.count() == 7
    assert demo.tasks.count() == 23
