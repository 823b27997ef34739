import pytest
from django.urls import reverse

from collaboration.models import CollaborationSession, Contribution
from tests.collaboration.conftest import specialists
from tests.factories import make_admin_user, make_agent, make_org
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('pwned')</script>"


def a_session(org, **fields):
    session = CollaborationSession.objects.create(
        organization=org,
        task=fields.pop("task", "Review the API"),
        max_parallel=3,
        agent_timeout=300,
        max_total_tokens=1000,
        **fields,
    )
    for i, (name, status) in enumerate(
        [
            ("a", "completed"),
            ("b", "completed"),
            ("c", "running"),
            ("d", "pending"),
            ("e", "timed_out"),
        ]
    ):
        Contribution.objects.create(
            session=session,
            position=i,
            agent_key=name,
            status=status,
            response=f"{name} says {SCRIPT}",
        )
    return session


def post_start_form(client, org, agents, mode: str, **fields):
    """The admin's start form, posted for `org` with these agents (task "t" and merged unless
    the fields say otherwise)."""
    return client.post(
        reverse("admin:collaboration_collaborationsession_start"),
        {
            "organization": org.pk,
            "task": "t",
            "agents": [agent.pk for agent in agents],
            "mode": mode,
            "synthesis": "merge",
            **fields,
        },
    )


@pytest.fixture
def alice(acme, client):
    user = make_admin_user(acme, username="alice")
    client.force_login(user)
    return client


def test_the_list_shows_status_and_progress(acme, alice):
    a_session(acme, status="running")
    response = alice.get(reverse("admin:collaboration_collaborationsession_changelist"))
    assert response.status_code == 200
    assert "3/5 agents done" in response.content.decode()
    assert "Start collaboration" in response.content.decode()


def test_llm_text_is_escaped_in_the_session_page(acme, alice):
    session = a_session(acme, status="completed", result=f"The result {SCRIPT}")
    response = alice.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert SCRIPT not in html
    # The result is Markdown: its tags as text (a quote needs no escaping outside attributes).
    assert "The result &lt;script&gt;alert('pwned')&lt;/script&gt;" in html
    assert "a says &lt;script&gt;" in html


def test_staff_see_only_their_organizations_sessions(acme, alice):
    theirs = a_session(make_org("theirs"), task="their secret task")
    listing = alice.get(reverse("admin:collaboration_collaborationsession_changelist"))
    assert "their secret task" not in listing.content.decode()
    change = alice.get(reverse("admin:collaboration_collaborationsession_change", args=[theirs.pk]))
    assert change.status_code in (302, 404)


def test_the_start_form_starts_a_session_with_organization_agents(acme, alice):
    alex, sarah = acme.agents.get(handle="agent-alex"), acme.agents.get(handle="agent-sarah")
    url = reverse("admin:collaboration_collaborationsession_start")
    page = alice.get(url).content.decode()
    assert "Alex — Backend Developer" in page
    assert "agent-sam" not in page  # paused: offline agents cannot take part
    response = post_start_form(
        alice, acme, [alex, sarah], "sequential", task="Plan the migration", focus=""
    )
    session = CollaborationSession.objects.get()
    assert response.status_code == 302
    assert response["Location"].endswith(f"/{session.pk}/change/")
    assert session.created_by == "user:alice"
    assert list(session.contributions.values_list("agent_key", flat=True)) == [
        "agent-alex",
        "agent-sarah",
    ]


def test_the_start_form_refuses_agents_of_another_organization(acme, alice):
    stranger = make_agent(make_org("theirs"), "agent-stranger")
    response = post_start_form(alice, acme, [stranger], "parallel")
    assert response.status_code == 200
    assert not CollaborationSession.objects.exists()


def test_the_start_form_shows_a_refusal_once(acme, alice):
    alex = acme.agents.get(handle="agent-alex")
    response = post_start_form(alice, acme, [alex], "hierarchical")
    assert response.status_code == 200
    message = "hierarchical mode needs a coordinator and at least one specialist"
    assert response.content.decode().count(message) == 1
    assert not CollaborationSession.objects.exists()


def test_the_cancel_action_cancels_queued_sessions(acme, alice):
    from collaboration.services import session_create
    from tests.collaboration.conftest import human

    session = session_create(caller=human(acme), payload={"task": "t", "agents": specialists("a")})
    alice.post(
        reverse("admin:collaboration_collaborationsession_changelist"),
        {"action": "cancel_sessions", "_selected_action": [session.pk]},
    )
    session.refresh_from_db()
    assert session.status == "cancelled"


def test_the_session_page_lists_its_events_in_order(acme, alice):
    from collaboration.models import SessionEvent

    session = a_session(acme, status="running")
    for name in (
        "tool:collaborative:queued",
        "tool:collaborative:start",
        "tool:collaborative:agent:start",
    ):
        SessionEvent.objects.create(session=session, name=name, data={"agent": "a"})
    html = alice.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    ).content.decode()
    # In words, in order (the API's names in each line's title).
    positions = [html.index(f'">{words} <span') for words in ("Queued", "Start", "Agent start")]
    assert positions == sorted(positions)
    assert "3/5 agents done" in html  # a, b completed and e timed out


def test_staff_of_no_organization_get_nothing(acme, client):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("bob", password="x", is_staff=True)
    client.force_login(user)
    a_session(acme)
    changelist = client.get(reverse("admin:collaboration_collaborationsession_changelist"))
    assert changelist.status_code == 403
    start = client.get(reverse("admin:collaboration_collaborationsession_start"))
    assert start.status_code == 403


def test_a_superuser_sees_every_organizations_sessions(acme, client):
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.create_superuser("root", password="x")
    client.force_login(root)
    a_session(acme, task="acme's task")
    a_session(make_org("theirs"), task="their task")
    html = client.get(reverse("admin:collaboration_collaborationsession_changelist")).content
    assert b"acme&#x27;s task" in html and b"their task" in html


@pytest.mark.django_db(transaction=True)
def test_a_script_in_an_llm_reply_is_escaped_in_the_admin(acme, alice, fake_llm):
    from collaboration.services import session_create
    from tests.collaboration.conftest import human, run

    fake_llm.on(agent="a", replies=Reply(f"a replies {SCRIPT}\nCONFIDENCE: 0.5"))
    fake_llm.on(purpose="synthesis", replies=Reply(f"synthesis {SCRIPT}"))
    session = run(
        session_create(caller=human(acme), payload={"task": "t", "agents": specialists("a", "b")})
    )
    assert session.result == f"synthesis {SCRIPT}"
    html = alice.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    ).content.decode()
    assert SCRIPT not in html
    assert "a replies &lt;script&gt;alert('pwned')&lt;/script&gt;" in html
    assert "synthesis &lt;script&gt;alert('pwned')&lt;/script&gt;" in html


def test_the_session_page_lists_an_agents_tool_calls_escaped(acme, alice):
    session = a_session(acme, status="completed")
    session.contributions.filter(agent_key="a").update(
        turns=[
            {"kind": "model", "index": 0, "text": "", "tool_calls": []},
            {
                "kind": "tool_call",
                "index": 1,
                "id": "1",
                "name": "get_organization_roster",
                "arguments": {"expertise": SCRIPT},
                "status": "ok",
                "result": {},
            },
            {
                "kind": "tool_call",
                "index": 2,
                "id": "2",
                "name": "get_my_context",
                "arguments": {},
                "status": "error",
                "error": {"success": False, "error": "no", "code": "agent_not_found"},
            },
        ]
    )
    response = alice.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    )
    html = response.content.decode()
    assert SCRIPT not in html
    assert (
        "get_organization_roster, expertise: &lt;script&gt;alert(&#x27;pwned&#x27;)"
        "&lt;/script&gt; → done\nget_my_context → refused (agent_not_found)"
    ) in html


def test_the_cancel_action_skips_a_session_that_finished_since_the_list_was_read(acme):
    """A cancel racing a finish: the action read the session running, its worker finished it
    before the cancel's lock. The action says so, as for a session seen finished (no 500)."""
    from django.contrib import admin
    from django.contrib.messages import get_messages
    from django.contrib.messages.storage.fallback import FallbackStorage
    from django.contrib.sessions.backends.db import SessionStore
    from django.test import RequestFactory

    running = a_session(acme, status="running")
    queued = a_session(acme, status="queued")
    seen = list(CollaborationSession.objects.filter(pk__in=[running.pk, queued.pk]))
    CollaborationSession.objects.filter(pk=running.pk).update(status="completed")  # the finish
    request = RequestFactory().post("/")
    request.user = make_admin_user(acme, username="bob")
    request.session = SessionStore()
    request._messages = FallbackStorage(request)
    model_admin = admin.site._registry[CollaborationSession]
    model_admin.cancel_sessions(request, seen)
    running.refresh_from_db()
    queued.refresh_from_db()
    assert (running.status, running.cancel_requested) == ("completed", False)
    assert queued.status == "cancelled"
    assert [str(m) for m in get_messages(request)] == ["Cancellation requested for 1 session(s)."]
