"""DATABASE_PREPARED (on by default on PostgreSQL): a statement a connection runs often is
prepared, so PostgreSQL stops parsing and planning it; the agent GET's two statements are."""

import pytest
from django.db import connection

from tests.conftest import KeyClient, agent_of
from tests.factories import make_key

pytestmark = pytest.mark.django_db


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")
def test_the_hot_statements_are_prepared_after_a_few_runs(demo):
    client = KeyClient(make_key(demo, agent_of(demo, "agent-sarah")))
    for _ in range(6):
        assert client.get("/api/agents/agent-alice").status_code == 200
    statements = prepared_statements()
    assert any('FROM "organization_apikey" k' in s for s in statements), statements
    assert any('"organization_agent"."handle" AS "handle"' in s for s in statements), statements


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")
def test_the_setting_turns_it_off(monkeypatch):
    import importlib

    from config.settings import database as project_settings

    monkeypatch.setenv("DATABASE_PREPARED", "false")
    try:
        options = importlib.reload(project_settings).DATABASES["default"]["OPTIONS"]
        assert "prepare_threshold" not in options and "server_side_binding" not in options
    finally:
        monkeypatch.delenv("DATABASE_PREPARED")
        options = importlib.reload(project_settings).DATABASES["default"]["OPTIONS"]
    assert options["prepare_threshold"] == 5 and options["server_side_binding"] is True


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")
def test_jit_is_off_unless_asked_for(monkeypatch):
    import importlib

    from config.settings import database as project_settings

    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"
    monkeypatch.setenv("DATABASE_JIT", "true")
    try:
        options = importlib.reload(project_settings).DATABASES["default"]["OPTIONS"]
        assert "options" not in options
    finally:
        monkeypatch.delenv("DATABASE_JIT")
        options = importlib.reload(project_settings).DATABASES["default"]["OPTIONS"]
    assert options["options"] == "-c jit=off"
