"""The Celery app (cookiecutter-django's layout)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("agent_org")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
