"""`/`: the first page a newcomer opens leads to the console, the API docs and the health check."""

import re

import pytest

pytestmark = pytest.mark.django_db


def test_the_front_page_links_to_the_console_the_api_docs_and_the_health_check(client):
    page = client.get("/")
    assert page.status_code == 200
    links = set(re.findall(r'href="([^"]+)"', page.content.decode()))
    assert {"/admin/", "/api/docs/", "/healthz"} <= links
    for link in ("/api/docs/", "/healthz"):
        assert client.get(link).status_code == 200, link
    assert client.get("/admin/").status_code == 302  # to the login


def test_the_readme_names_the_health_check():
    from django.conf import settings

    readme = (settings.BASE_DIR / "README.md").read_text()
    assert "/healthz" in readme
