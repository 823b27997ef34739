"""The migrations describe the models exactly: `make test-fast` builds its test databases from
the models (--nomigrations, three times faster), `make test` and production from the migrations,
so both must give the same schema."""

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_the_models_need_no_new_migration():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out)
    except SystemExit as exit:
        raise AssertionError(f"the models and their migrations differ:\n{out.getvalue()}") from exit
    assert "No changes detected" in out.getvalue()
