import pytest
from django.core.exceptions import ImproperlyConfigured

from collaboration.apps import check_visibility_timeout


def test_a_visibility_timeout_shorter_than_a_session_fails_at_start_up(settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 600}
    settings.COLLAB_SESSION_TIME_LIMIT = 2430
    with pytest.raises(ImproperlyConfigured, match="CELERY_VISIBILITY_TIMEOUT"):
        check_visibility_timeout()


def test_a_longer_visibility_timeout_or_another_broker_is_fine(settings):
    settings.COLLAB_SESSION_TIME_LIMIT = 2430
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
    check_visibility_timeout()
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    check_visibility_timeout()


def test_a_worker_or_server_does_not_start_with_a_short_visibility_timeout():
    """The check runs at start-up (AppConfig.ready), not only when called."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    redis_url = "redis://127.0.0.1:6379/4"
    env = {**os.environ, "REDIS_URL": redis_url, "CELERY_BROKER_URL": redis_url,
           "CELERY_VISIBILITY_TIMEOUT": "60", "COLLAB_SESSION_TIME_LIMIT": "120"}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=Path(__file__).resolve().parents[2],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "CELERY_VISIBILITY_TIMEOUT (60 s) must exceed COLLAB_SESSION_TIME_LIMIT" in result.stderr
