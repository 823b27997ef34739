"""Every console page — each list and the latest object of each — reads in words: no JSON
written out, no API word (`subtasks_done`, `in_progress`) where a sentence fits, on an
organization after a week of use (runs with their conversations, calls, keys)."""

import re

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse

from tests.e2e.busy import make_busy

pytestmark = pytest.mark.django_db

API_WORDS = re.compile(
    r"\b(subtasks_done|in_progress|auto_assigned|status_changed|timed_out|best_of|org-key:\w+)"
)


def visible(html: str) -> str:
    """The page's text and markup, without what a reader does not see (scripts, styles, form
    values, choices of a drop-down, attributes) and without a tool's answer on a run's page,
    which is shown as the indented JSON the model was given."""
    html = re.sub(r'<pre class="tool-result">.*?</pre>', "", html, flags=re.S)
    html = re.sub(r"<(script|style|select)[^>]*>.*?</\1>", "", html, flags=re.S)
    html = re.sub(r"<input[^>]*>", "", html)
    return re.sub(r'\s[\w:-]+="[^"]*"', "", html)


def pages():
    for model in admin.site._registry:
        meta = model._meta
        yield reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"), None
        yield f"{meta.app_label}_{meta.model_name}", model


def test_every_console_page_reads_in_words(client, demo):
    make_busy(demo)
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    found = {}
    for url, model in pages():
        if model is not None:
            latest = model._default_manager.order_by("-pk").first()
            if latest is None:
                continue
            url = reverse(f"admin:{url}_change", args=[latest.pk])
        response = client.get(url)
        assert response.status_code == 200, url
        text = visible(response.content.decode())
        blobs = re.findall(r"[{\[]\s*&quot;", text)
        words = sorted(set(API_WORDS.findall(text)))
        if blobs or words:
            found[url] = (len(blobs), words)
    assert found == {}


def test_every_task_agent_and_run_page_of_the_demo_reads_in_words(client, demo):
    from runtime.models import Run

    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    found = {}
    for name, rows in (
        ("tasks_task", demo.tasks.all()),
        ("organization_agent", demo.agents.all()),
        ("runtime_run", Run.objects.filter(organization=demo)),
    ):
        for row in rows:
            url = reverse(f"admin:{name}_change", args=[row.pk])
            text = visible(client.get(url).content.decode())
            words = sorted(set(API_WORDS.findall(text)))
            if words or re.search(r"[{\[]\s*&quot;", text):
                found[url] = words
    assert found == {}


def test_a_status_change_reads_as_a_move_in_words(client, demo):
    blocked = demo.tasks.get(status="blocked")
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    html = client.get(reverse("admin:tasks_task_change", args=[blocked.pk])).content.decode()
    assert "moved it from in progress to blocked." in html
