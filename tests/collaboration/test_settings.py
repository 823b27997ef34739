import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from collaboration.apps import check_settings, check_visibility_timeout


def manage_py_check(**env: str) -> subprocess.CompletedProcess:
    """`manage.py check` in a process of its own, with these variables added to our environment:
    what a worker or server starting with them would do."""
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


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
    redis_url = "redis://127.0.0.1:6379/4"
    result = manage_py_check(
        REDIS_URL=redis_url,
        CELERY_BROKER_URL=redis_url,
        CELERY_VISIBILITY_TIMEOUT="60",
        COLLAB_SESSION_TIME_LIMIT="120",
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "CELERY_VISIBILITY_TIMEOUT (60 s) must exceed COLLAB_SESSION_TIME_LIMIT" in result.stderr


@pytest.mark.parametrize(
    "name, value, message",
    [
        (
            "COLLAB_DEFAULT_MODE",
            "swarm",
            "COLLAB_DEFAULT_MODE='swarm': must be one of parallel, sequential, hierarchical.",
        ),
        (
            "COLLAB_DEFAULT_SYNTHESIS",
            "Vote",
            "COLLAB_DEFAULT_SYNTHESIS='Vote': must be one of coordinator, vote, merge, best_of.",
        ),
        (
            "COLLAB_COORDINATOR_MODEL",
            "gpt 4o",
            "COLLAB_COORDINATOR_MODEL='gpt 4o': a model name of at most 100 characters",
        ),
        ("COLLAB_COORDINATOR_MODEL", "m" * 101, "COLLAB_COORDINATOR_MODEL='mmm"),
        (
            "COLLAB_MAX_STARTS_PER_HOUR",
            0,
            "COLLAB_MAX_STARTS_PER_HOUR=0: must be a positive integer.",
        ),
        (
            "COLLAB_MAX_STARTS_PER_HOUR",
            "lots",
            "COLLAB_MAX_STARTS_PER_HOUR='lots': must be a positive integer.",
        ),
    ],
)
def test_a_collaboration_setting_it_does_not_know_is_refused(settings, name, value, message):
    setattr(settings, name, value)
    with pytest.raises(ImproperlyConfigured) as refused:
        check_settings()
    assert message in str(refused.value)


def test_known_collaboration_settings_pass(settings):
    settings.COLLAB_DEFAULT_MODE = "hierarchical"
    settings.COLLAB_DEFAULT_SYNTHESIS = "best_of"
    settings.COLLAB_COORDINATOR_MODEL = "claude-sonnet-4-5"
    settings.COLLAB_MAX_STARTS_PER_HOUR = 1
    check_settings()
    settings.COLLAB_COORDINATOR_MODEL = ""  # unset: LLM_MODEL
    check_settings()


def test_bad_collaboration_settings_stop_start_up_with_a_message():
    result = manage_py_check(
        COLLAB_DEFAULT_SYNTHESIS="consensus", COLLAB_MAX_STARTS_PER_HOUR="lots"
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "COLLAB_DEFAULT_SYNTHESIS='consensus': must be one of" in result.stderr
    assert "COLLAB_MAX_STARTS_PER_HOUR='lots': must be a positive integer." in result.stderr
