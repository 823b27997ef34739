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
