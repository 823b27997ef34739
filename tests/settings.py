"""The test suite's settings: config.settings with a test-only SECRET_KEY.

`pytest` (pyproject's DJANGO_SETTINGS_MODULE) and `python manage.py test` (manage.py) load this
module. The key goes into the environment before config.settings reads it, so the Celery
workers, servers and management commands the tests start as subprocesses get it too.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-only-insecure-key-never-use-outside-the-test-suite")

from config.settings import *  # noqa: E402,F403
