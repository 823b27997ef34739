"""Collaboration results and answers are Markdown, rendered with no raw HTML passing."""

import pytest
from django.urls import reverse

from collaboration.models import Contribution, SessionEvent
from organization.admin.markup import markdown_html
from tests.console.data import a_vote
from tests.factories import make_admin_user, make_org

pytestmark = pytest.mark.django_db

HOSTILE = (
    "## The plan\n\n- **ship** on Friday\n- `migrate` first\n\n"
    '<img src=x onerror="alert(1)"> <script>alert(2)</script>\n\n'
    "[click](javascript:alert(3)) ![pixel](https://tracker.example/p.png) "
    "[docs](https://example.com/docs)"
)


def test_markdown_renders_structure_and_never_passes_raw_html():
    html = markdown_html(HOSTILE)
    assert "<h2>The plan</h2>" in html
    assert "<li><strong>ship</strong> on Friday</li>" in html
    assert "<code>migrate</code>" in html
    assert '<a href="https://example.com/docs">docs</a>' in html
    # No tag of the text's own, no script link; an image is a plain link (nothing is fetched).
    assert "<img" not in html and "<script" not in html and 'href="javascript' not in html
    assert '<a href="https://tracker.example/p.png">pixel</a>' in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


def test_a_collaboration_page_renders_its_result_and_answers_as_markdown(client):
    org = make_org("acme")
    session = a_vote(org)
    session.result = HOSTILE
    session.save(update_fields=["result"])
    Contribution.objects.filter(session=session, agent_key="agent-a").update(
        response="**Ship it.**\n\n1. tests pass\n2. <b>no</b> risk"
    )
    SessionEvent.objects.create(session=session, name="contribution_completed", data={})
    client.force_login(make_admin_user(org))
    response = client.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    )
    assert response.status_code == 200
    html = response.content.decode()
    result = html.split('id="result"')[1].split("</div>")[0]
    assert "<h2>The plan</h2>" in result and "<strong>ship</strong>" in result
    assert "<img" not in result and 'href="javascript' not in result
    assert "<p><strong>Ship it.</strong></p>" in html
    assert "<li>tests pass</li>" in html and "&lt;b&gt;no&lt;/b&gt; risk" in html
    # Events in words, not the API's names.
    assert '">Contribution completed <span' in html
