"""The admin as hierarchy editor (issue 2 §3): agents, org chart, API keys, tenant scoping."""

import hashlib
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from organization.models import Agent, AgentRole, ApiKey, Membership, Team, TeamRule
from tasks.models import Task, TaskStatus
from tests.conftest import agent_of
from tests.factories import give_tasks, make_admin_user, make_agent, make_key, make_org, make_team

AGENTS = reverse("admin:organization_agent_changelist")


# --- a small cast and a browser-like form reader -----------------------------------------


@pytest.fixture
def root(db):
    return get_user_model().objects.create_superuser("root", "root@example.com", "pw")


@pytest.fixture
def root_client(client, root):
    client.force_login(root)
    return client


@pytest.fixture
def bob(demo):
    """Bob is staff and administers the demo organization only; no Django permissions."""
    return make_admin_user(demo, username="bob")


@pytest.fixture
def bob_client(client, bob):
    client.force_login(bob)
    return client


@pytest.fixture
def rival(db):
    """Another organization with an agent, a team, a key and an expertise group."""
    org = make_org("rival")
    team = make_team(org, "Rival Team")
    agent = make_agent(org, "agent-zed", name="Zed", team=team, expertise=["Cobol"])
    make_key(org, agent)
    org.expertise_groups.create(name="Rival Group", expertise=["Cobol"])
    return org


class FormReader(HTMLParser):
    """Collects what a browser would submit for one <form id=...>."""

    def __init__(self, form_id: str):
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.data: dict[str, list[str]] = {}
        self.select: str | None = None
        self.textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.inside = attrs.get("id") == self.form_id
        if not self.inside:
            return
        name = attrs.get("name")
        if tag == "input" and name:
            kind = attrs.get("type", "text")
            if kind in ("submit", "button", "file"):
                return
            if kind in ("checkbox", "radio") and "checked" not in attrs:
                return
            default = "on" if kind in ("checkbox", "radio") else ""
            self.data.setdefault(name, []).append(attrs.get("value", default))
        elif tag == "select" and name:
            self.select = name
            self.data.setdefault(name, [])
        elif tag == "option" and self.select and "selected" in attrs:
            self.data[self.select].append(attrs.get("value", ""))
        elif tag == "textarea" and name:
            self.textarea = name
            self.data[name] = [""]

    def handle_data(self, data):
        if self.textarea:
            self.data[self.textarea][0] += data

    def handle_endtag(self, tag):
        if tag == "select":
            self.select = None
        elif tag == "textarea":
            if self.textarea:
                # Browsers drop the newline right after <textarea>.
                self.data[self.textarea][0] = self.data[self.textarea][0].removeprefix("\n")
            self.textarea = None
        elif tag == "form":
            self.inside = False


def form_of(client, url: str, form_id: str) -> dict:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    reader = FormReader(form_id)
    reader.feed(response.content.decode())
    assert reader.data, f"no form {form_id} at {url}"
    return {
        name: values if len(values) > 1 else (values[0] if values else "")
        for name, values in reader.data.items()
    }


def change_url(obj) -> str:
    meta = obj._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])


def chart_url(org) -> str:
    return reverse("admin:organization_organization_org_chart", args=[org.pk])


def row_of(html: str, handle: str) -> str:
    """The changelist row that names the agent `handle` (under its name, in the link)."""
    at = html.index(f">{handle}</span>")
    return html[html.rindex("<tr", 0, at) : html.index("</tr>", at)]


def listed(response) -> list:
    return list(response.context["cl"].result_list)


# --- the agent changelist ----------------------------------------------------------------


def test_agent_changelist_shows_the_hierarchy_status_and_workload(root_client, demo):
    response = root_client.get(AGENTS)
    assert response.status_code == 200
    html = response.content.decode()
    row = row_of(html, "agent-jordan")
    for expected in [
        "Jordan",
        "DevOps Engineer",
        "Infrastructure",
        'title="agent-sam">Sam<',
        "Worker",
    ]:
        assert expected in row
    assert "5/5" in row
    assert "agent-status-busy" in row
    assert "Docker, Kubernetes, AWS" in row
    sam = row_of(html, "agent-sam")
    assert "agent-status-offline" in sam and "0/5" in sam and "Supervisor" in sam
    assert ">Busy</span>" in row  # human labels, not the API's values


@pytest.mark.parametrize(
    ("status", "handles"),
    [
        ("idle", {"agent-alex"}),
        ("active", {"agent-sarah", "agent-taylor"}),
        ("busy", {"agent-alice", "agent-jordan", "agent-database-lead"}),
        ("offline", {"agent-sam"}),
    ],
)
def test_status_filter_computes_status_from_workload_and_pause(root_client, demo, status, handles):
    response = root_client.get(AGENTS, {"status": status})
    assert {agent.handle for agent in listed(response)} == handles


def test_hierarchy_role_filter_lists_the_role_and_agents_without_one(root_client, demo):
    make_agent(demo, "agent-new")
    supervisors = listed(root_client.get(AGENTS, {"hierarchy_role": "supervisor"}))
    assert {a.handle for a in supervisors} == {"agent-alice", "agent-sam"}
    without = listed(root_client.get(AGENTS, {"hierarchy_role": "none"}))
    assert [a.handle for a in without] == ["agent-new"]


def test_team_filter_lists_the_team_members(root_client, demo):
    design = demo.teams.get(name="Design")
    response = root_client.get(AGENTS, {"team__id__exact": design.pk})
    assert [a.handle for a in listed(response)] == ["agent-taylor"]


@pytest.mark.parametrize(
    ("term", "handles"),
    [
        ("Kubernetes", {"agent-jordan"}),
        ("postgresql", {"agent-alex", "agent-database-lead"}),
        ("Morgan", {"agent-database-lead"}),
        ("agent-sa", {"agent-sam", "agent-sarah"}),
    ],
)
def test_search_matches_name_handle_and_expertise(root_client, demo, term, handles):
    response = root_client.get(AGENTS, {"q": term})
    assert {a.handle for a in listed(response)} == handles


def test_pause_and_resume_actions_set_the_paused_flag(root_client, demo):
    sarah, alex = agent_of(demo, "agent-sarah"), agent_of(demo, "agent-alex")
    response = root_client.post(
        AGENTS, {"action": "pause_agents", "_selected_action": [sarah.pk, alex.pk]}
    )
    assert response.status_code == 302
    assert set(demo.agents.filter(is_paused=True).values_list("handle", flat=True)) == {
        "agent-sam",
        "agent-sarah",
        "agent-alex",
    }
    root_client.post(AGENTS, {"action": "resume_agents", "_selected_action": [sarah.pk]})
    sarah.refresh_from_db()
    alex.refresh_from_db()
    assert (sarah.is_paused, alex.is_paused) == (False, True)


def test_changelist_renders_in_the_same_number_of_queries_for_20_and_2000_agents(
    root_client, django_assert_max_num_queries
):
    def populate(slug: str, size: int):
        org = make_org(slug)
        teams = [make_team(org, f"Team {i}") for i in range(5)]
        boss = make_agent(org, "agent-boss", hierarchy_role="supervisor")
        Agent.objects.bulk_create(
            Agent(
                organization=org,
                handle=f"agent-{i}",
                name=f"Agent {i}",
                team=teams[i % 5],
                senior=boss,
                expertise=["Python", f"Skill {i % 7}"],
            )
            for i in range(size - 1)
        )
        AgentRole.objects.bulk_create(
            AgentRole(agent=agent, role="worker")
            for agent in org.agents.exclude(pk=boss.pk)[: size // 2]
        )
        for agent in org.agents.order_by("pk")[:10]:
            give_tasks(agent, 3)
        return org

    small, large = populate("small", 20), populate("large", 2000)
    for org in (small, large):
        with django_assert_max_num_queries(9):
            response = root_client.get(AGENTS, {"organization__id__exact": org.pk})
        assert response.status_code == 200
        assert len(listed(response)) == min(org.agents.count(), 100)


# --- the agent form: role inline, validation as form errors ------------------------------


def test_hierarchy_role_is_edited_inline_on_the_agent(root_client, demo):
    alex = agent_of(demo, "agent-alex")
    url = change_url(alex)
    data = form_of(root_client, url, "agent_form")
    data["hierarchy_role-0-role"] = "specialist"
    data["hierarchy_role-0-can_assign_to_peers"] = "on"
    response = root_client.post(url, data)
    assert response.status_code == 302, response.context["errors"]
    role = AgentRole.objects.get(agent=alex)
    assert (role.role, role.can_assign_to_peers) == ("specialist", True)


def test_expertise_is_typed_one_term_per_line_and_a_term_may_hold_a_comma(root_client, demo):
    alex = agent_of(demo, "agent-alex")
    url = change_url(alex)
    data = form_of(root_client, url, "agent_form")
    assert data["expertise"] == "Node.js\nPostgreSQL\nAPI Design"
    data["expertise"] = "Go\r\n  SQL \r\n\r\nDesign, UX\r\n"
    assert root_client.post(url, data).status_code == 302
    alex.refresh_from_db()
    assert alex.expertise == ["Go", "SQL", "Design, UX"]
    # Saved again unchanged, it stays as it is.
    assert root_client.post(url, form_of(root_client, url, "agent_form")).status_code == 302
    alex.refresh_from_db()
    assert alex.expertise == ["Go", "SQL", "Design, UX"]


def test_the_view_site_link_leads_to_the_front_page(root_client):
    index = root_client.get(reverse("admin:index"))
    assert index.context["site_url"] == "/"
    assert root_client.get("/").status_code == 200


def test_a_senior_cycle_is_a_form_error(root_client, demo):
    alice, jordan = agent_of(demo, "agent-alice"), agent_of(demo, "agent-jordan")
    url = change_url(alice)
    data = form_of(root_client, url, "agent_form")
    data["senior"] = jordan.pk
    response = root_client.post(url, data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["senior"] == [
        "This senior would create a cycle in the reporting line."
    ]
    alice.refresh_from_db()
    assert alice.senior_id is None


def test_a_team_or_senior_of_another_organization_is_a_form_error(root_client, demo, rival):
    alex = agent_of(demo, "agent-alex")
    url = change_url(alex)
    data = form_of(root_client, url, "agent_form")
    data["team"] = rival.teams.get().pk
    data["senior"] = agent_of(rival, "agent-zed").pk
    response = root_client.post(url, data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["team"] == ["The team must belong to the agent's organization."]
    assert errors["senior"] == ["The senior must belong to the agent's organization."]


def test_a_handle_posted_to_the_change_page_changes_nothing(root_client, demo):
    # The id is read-only once the agent exists (tests/organization/test_agent_handle.py): a
    # taken one posted anyway is ignored, not a crash nor a rename.
    alex = agent_of(demo, "agent-alex")
    url = change_url(alex)
    data = form_of(root_client, url, "agent_form")
    data["handle"] = "agent-sarah"
    response = root_client.post(url, data)
    assert response.status_code == 302
    alex.refresh_from_db()
    assert alex.handle == "agent-alex"
    assert demo.agents.filter(handle="agent-sarah").count() == 1


def test_team_and_senior_autocomplete_offer_the_agents_organization_only(root_client, demo, rival):
    html = root_client.get(change_url(agent_of(demo, "agent-alex"))).content.decode()
    assert f"/admin/autocomplete/?org_scope={demo.pk}" in html
    response = root_client.get(
        "/admin/autocomplete/",
        {
            "org_scope": demo.pk,
            "term": "",
            "app_label": "organization",
            "model_name": "agent",
            "field_name": "senior",
        },
    )
    ids = {row["id"] for row in response.json()["results"]}
    assert ids == {str(pk) for pk in demo.agents.values_list("pk", flat=True)}


# --- organization: team rule, inlines ----------------------------------------------------


def test_default_supervisor_must_hold_the_supervisor_role(root_client, demo):
    url = change_url(demo)
    data = form_of(root_client, url, "organization_form")
    data["team_rule-0-default_supervisor"] = agent_of(demo, "agent-sarah").pk
    response = root_client.post(url, data)
    assert response.status_code == 200
    assert "Agent must have supervisor role to be default supervisor" in response.content.decode()
    data["team_rule-0-default_supervisor"] = agent_of(demo, "agent-alice").pk
    data["team_rule-0-require_supervisor_for_tasks"] = "on"
    response = root_client.post(url, data)
    assert response.status_code == 302
    rule = TeamRule.objects.get(organization=demo)
    assert rule.default_supervisor.handle == "agent-alice"
    assert rule.require_supervisor_for_tasks is True


def test_organization_page_edits_teams_members_and_expertise_groups(root_client, demo, bob):
    url = change_url(demo)
    data = form_of(root_client, url, "organization_form")
    total = int(data["teams-TOTAL_FORMS"])
    data.update({"teams-TOTAL_FORMS": total + 1, f"teams-{total}-name": "Research"})
    groups = int(data["expertise_groups-TOTAL_FORMS"])
    data.update(
        {
            "expertise_groups-TOTAL_FORMS": groups + 1,
            f"expertise_groups-{groups}-name": "Data",
            f"expertise_groups-{groups}-expertise": "Pandas\nSQL",
        }
    )
    response = root_client.post(url, data)
    assert response.status_code == 302
    assert demo.teams.filter(name="Research").exists()
    assert demo.expertise_groups.get(name="Data").expertise == ["Pandas", "SQL"]
    assert Membership.objects.filter(organization=demo, user=bob).exists()


def test_organization_page_and_agent_changelist_link_to_the_org_chart(root_client, demo):
    assert chart_url(demo) in root_client.get(change_url(demo)).content.decode()
    assert chart_url(demo) in root_client.get(AGENTS).content.decode()


# --- API keys ----------------------------------------------------------------------------


def test_an_api_key_is_shown_in_plain_text_once_and_only_its_digest_is_stored(root_client, demo):
    sarah = agent_of(demo, "agent-sarah")
    response = root_client.post(
        reverse("admin:organization_apikey_add"),
        {"organization": demo.pk, "agent": sarah.pk, "name": "sarah laptop"},
    )
    key = ApiKey.objects.get(name="sarah laptop")
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:organization_apikey_created", args=[key.pk])
    response = root_client.get(response["Location"])
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    plaintext = response.context["plaintext"]
    assert plaintext in response.content.decode()
    assert (key.agent, key.organization) == (sarah, demo)
    secret = plaintext.split("_", 2)[2]
    assert key.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert plaintext not in str(list(ApiKey.objects.values_list()))

    for url in [
        change_url(key),
        reverse("admin:organization_apikey_changelist"),
        change_url(demo),
    ]:
        page = root_client.get(url)
        assert page.status_code == 200
        assert plaintext not in page.content.decode()
        assert secret not in page.content.decode()

    # The key works: it is the agent's.
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert api.get("/api/roster").json()["agent_context"]["id"] == "agent-sarah"


def test_refreshing_the_key_created_page_makes_no_second_key(root_client, demo):
    response = root_client.post(
        reverse("admin:organization_apikey_add"), {"organization": demo.pk, "name": "once"}
    )
    shown = root_client.get(response["Location"])
    assert shown.status_code == 200 and shown.context["plaintext"]
    again = root_client.get(response["Location"])
    assert again.status_code == 302
    assert again["Location"] == change_url(ApiKey.objects.get(name="once"))
    assert ApiKey.objects.filter(organization=demo).count() == 1


def test_the_key_created_page_of_another_organization_is_a_404(client, demo, rival):
    key = rival.api_keys.get()
    client.force_login(make_admin_user(demo))
    page = client.get(reverse("admin:organization_apikey_created", args=[key.pk]))
    assert page.status_code == 404


def test_an_agent_of_another_organization_cannot_get_a_key_here(root_client, demo, rival):
    response = root_client.post(
        reverse("admin:organization_apikey_add"),
        {"organization": demo.pk, "agent": agent_of(rival, "agent-zed").pk, "name": "x"},
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["agent"] == [
        "The agent must belong to the key's organization."
    ]
    assert not ApiKey.objects.filter(name="x").exists()


def test_revoke_action_revokes_keys(root_client, demo):
    make_key(demo)
    key = ApiKey.objects.get(organization=demo)
    response = root_client.post(
        reverse("admin:organization_apikey_changelist"),
        {"action": "revoke_keys", "_selected_action": [key.pk]},
    )
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_keys_are_revoked_from_the_organization_page(root_client, demo):
    make_key(demo)
    key = ApiKey.objects.get(organization=demo)
    url = change_url(demo)
    data = form_of(root_client, url, "organization_form")
    data["api_keys-0-revoke"] = "on"
    assert root_client.post(url, data).status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None


# --- the org chart -----------------------------------------------------------------------


def test_org_chart_shows_the_tree_of_seniors_with_status_workload_and_queue(root_client, demo):
    jordan = agent_of(demo, "agent-jordan")
    for _ in range(2):
        Task.objects.create(
            organization=demo, title="waits", status=TaskStatus.QUEUED, queued_for=jordan
        )
    response = root_client.get(chart_url(demo))
    assert response.status_code == 200
    nodes = {node.agent.handle: node for node in response.context["nodes"]}
    # Grouped by team, the team at the top of the organization first, then by name.
    teams = {team.name: team for team in response.context["teams"]}
    assert list(teams) == ["Leadership", "Design", "Development", "Infrastructure"]
    infra = [(n.agent.handle, n.depth) for n in teams["Infrastructure"].nodes]
    assert infra[0] == ("agent-sam", 0) and ("agent-jordan", 1) in infra
    assert nodes["agent-sam"].senior_elsewhere.handle == "agent-alice"
    # Sam is offline and two agents report to him: flagged, on his card and at the top.
    assert nodes["agent-sam"].flagged and nodes["agent-sam"].reports == 2
    assert [n.agent.handle for n in response.context["flagged"]] == ["agent-sam"]
    assert teams["Infrastructure"].flagged == 1 and teams["Leadership"].flagged == 0
    assert (nodes["agent-jordan"].status, nodes["agent-jordan"].percent) == ("busy", 100)
    assert nodes["agent-jordan"].agent.queue_length == 2
    assert nodes["agent-sam"].status == "offline"
    html = response.content.decode()
    jordan_card = html[html.index('id="agent-agent-jordan"') :].split("</li>")[0]
    assert 'class="org-card s-busy"' in jordan_card
    assert ".org-card.s-busy { border-left-color: #e65100; }" in html
    for expected in ["5/5", "5 open", "2 queued", "Docker", "Kubernetes", "Infrastructure"]:
        assert expected in jordan_card
    # Jordan's list item sits inside Sam's (a fold), in the Infrastructure team's fold.
    sam = html[html.index('id="agent-agent-sam"') :]
    assert sam.index('id="agent-agent-jordan"') < sam.index("</details>")
    assert "Offline with 2 reports" in sam.split("</summary>")[0]
    assert html.count("<ul>") == html.count("</ul>")
    assert html.count("<details") == html.count("</details>")


def test_org_chart_escapes_user_text(root_client, demo):
    make_agent(demo, "agent-x", name="<script>alert(1)</script>", expertise=["<b>bold</b>"])
    html = root_client.get(chart_url(demo)).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html


def test_org_chart_renders_in_the_same_number_of_queries_for_20_and_2000_agents(
    root_client, django_assert_max_num_queries
):
    for slug, size in [("small", 20), ("large", 2000)]:
        org = make_org(slug)
        boss = make_agent(org, "agent-boss", hierarchy_role="supervisor")
        Agent.objects.bulk_create(
            Agent(organization=org, handle=f"agent-{i}", name=f"A{i}", senior=boss)
            for i in range(size - 1)
        )
        give_tasks(boss, 2)
        with django_assert_max_num_queries(5):
            response = root_client.get(chart_url(org))
        assert len(response.context["nodes"]) == size


# --- staff who are not superusers --------------------------------------------------------


def test_staff_member_sees_only_the_organizations_they_administer(bob_client, demo, rival):
    for name, mine, theirs in [
        ("organization_changelist", demo.pk, rival.pk),
        ("agent_changelist", agent_of(demo, "agent-alex").pk, agent_of(rival, "agent-zed").pk),
        ("team_changelist", demo.teams.first().pk, rival.teams.get().pk),
        ("apikey_changelist", None, rival.api_keys.get().pk),
        ("expertisegroup_changelist", None, rival.expertise_groups.get().pk),
        ("membership_changelist", None, None),
    ]:
        response = bob_client.get(reverse(f"admin:organization_{name}"))
        assert response.status_code == 200, name
        pks = {obj.pk for obj in listed(response)}
        if mine:
            assert mine in pks, name
        if theirs:
            assert theirs not in pks, name
    html = bob_client.get(AGENTS).content.decode()
    assert "agent-zed" not in html and "Rival Team" not in html


@pytest.mark.parametrize("kind", ["organization", "agent", "team", "apikey", "expertisegroup"])
def test_staff_member_cannot_open_or_edit_another_organizations_objects(bob_client, rival, kind):
    obj = {
        "organization": rival,
        "agent": agent_of(rival, "agent-zed"),
        "team": rival.teams.get(),
        "apikey": rival.api_keys.get(),
        "expertisegroup": rival.expertise_groups.get(),
    }[kind]
    url = change_url(obj)
    response = bob_client.get(url)
    # Django's admin answers a missing object with a redirect to the index and "doesn't exist".
    assert response.status_code == 302 and response.url == reverse("admin:index")
    assert "doesn’t exist" in bob_client.get(response.url).content.decode()
    response = bob_client.post(url, {"name": "hacked", "handle": "hacked"})
    assert response.status_code == 302 and response.url == reverse("admin:index")
    obj.refresh_from_db()
    assert getattr(obj, "name", "") != "hacked"
    delete = reverse(f"admin:organization_{kind}_delete", args=[obj.pk])
    bob_client.post(delete, {"post": "yes"})
    assert type(obj).objects.filter(pk=obj.pk).exists()


def test_staff_member_gets_404_for_another_organizations_org_chart(bob_client, demo, rival):
    assert bob_client.get(chart_url(rival)).status_code == 404
    assert bob_client.get(chart_url(demo)).status_code == 200


def test_staff_member_choices_and_autocomplete_stay_in_their_organization(bob_client, demo, rival):
    response = bob_client.get(reverse("admin:organization_agent_add"))
    form = response.context["adminform"].form
    assert list(form.fields["organization"].queryset) == [demo]
    assert form.initial["organization"] == demo.pk
    assert not form.fields["team"].queryset.filter(organization=rival).exists()
    assert not form.fields["senior"].queryset.filter(organization=rival).exists()
    response = bob_client.get(
        "/admin/autocomplete/",
        {
            "org_scope": rival.pk,
            "term": "",
            "app_label": "organization",
            "model_name": "agent",
            "field_name": "senior",
        },
    )
    assert response.json()["results"] == []
    response = bob_client.post(
        reverse("admin:organization_apikey_add"), {"organization": rival.pk, "name": "steal"}
    )
    assert response.status_code == 200
    assert "organization" in response.context["adminform"].form.errors
    assert not ApiKey.objects.filter(name="steal").exists()


def test_staff_member_without_superuser_can_build_their_hierarchy(bob_client, demo):
    response = bob_client.post(
        reverse("admin:organization_team_add"), {"organization": demo.pk, "name": "Research"}
    )
    assert response.status_code == 302
    research = Team.objects.get(organization=demo, name="Research")
    data = form_of(bob_client, reverse("admin:organization_agent_add"), "agent_form")
    data.update(
        {
            "handle": "agent-robin",
            "name": "Robin",
            "team": research.pk,
            "senior": agent_of(demo, "agent-alice").pk,
            "expertise": "Statistics",
            "hierarchy_role-0-role": "specialist",
        }
    )
    response = bob_client.post(reverse("admin:organization_agent_add"), data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    robin = agent_of(demo, "agent-robin")
    assert (robin.team, robin.senior.handle, robin.hierarchy_role.role) == (
        research,
        "agent-alice",
        "specialist",
    )
    assert "agent-robin" in bob_client.get(chart_url(demo)).content.decode()
    response = bob_client.post(AGENTS, {"action": "pause_agents", "_selected_action": [robin.pk]})
    robin.refresh_from_db()
    assert robin.is_paused


def test_staff_member_cannot_add_or_delete_organizations(bob_client, demo):
    assert bob_client.get(reverse("admin:organization_organization_add")).status_code == 403
    response = bob_client.post(
        reverse("admin:organization_organization_delete", args=[demo.pk]), {"post": "yes"}
    )
    assert response.status_code == 403


def test_staff_without_an_admin_membership_sees_nothing(client, demo):
    carol = make_admin_user(None, username="carol")
    Membership.objects.create(user=carol, organization=demo, is_admin=False)
    client.force_login(carol)
    index = client.get(reverse("admin:index"))
    assert "organization/agent" not in index.content.decode()
    assert client.get(AGENTS).status_code == 403
    assert client.get(chart_url(demo)).status_code == 404


def test_staff_member_chooses_members_among_the_people_of_their_organizations(
    bob_client, bob, demo, rival
):
    outsider = make_admin_user(rival, username="eve")
    response = bob_client.get(reverse("admin:organization_membership_add"))
    users = set(response.context["adminform"].form.fields["user"].queryset)
    assert bob in users and outsider not in users


def test_links_to_an_organizations_agents_work_for_staff(bob_client, demo):
    html = bob_client.get(chart_url(demo)).content.decode()
    link = f"{AGENTS}?organization__id__exact={demo.pk}"
    assert link in html
    response = bob_client.get(link)
    assert response.status_code == 200
    assert len(listed(response)) == 7


def test_a_resumed_agent_receives_the_tasks_waiting_in_its_queue(root_client, demo):
    sam = agent_of(demo, "agent-sam")
    waiting = Task.objects.create(
        organization=demo, title="terraform plan", status=TaskStatus.QUEUED, queued_for=sam
    )
    root_client.post(AGENTS, {"action": "resume_agents", "_selected_action": [sam.pk]})
    waiting.refresh_from_db()
    assert (waiting.status, waiting.assignee) == (TaskStatus.ASSIGNED, sam)


@pytest.mark.parametrize(("field", "value"), [("is_paused", None), ("workload_capacity", "9")])
def test_an_agent_resumed_or_given_room_in_its_form_receives_its_queue(
    root_client, demo, field, value
):
    sam = agent_of(demo, "agent-sam")
    if field == "workload_capacity":
        Agent.objects.filter(pk=sam.pk).update(is_paused=False, workload_capacity=0)
    waiting = Task.objects.create(
        organization=demo, title="terraform plan", status=TaskStatus.QUEUED, queued_for=sam
    )
    url = change_url(sam)
    data = form_of(root_client, url, "agent_form")
    if value is None:
        data.pop(field, None)  # an unticked checkbox is absent from the POST
    else:
        data[field] = value
    response = root_client.post(url, data)
    assert response.status_code == 302, response.context["errors"]
    waiting.refresh_from_db()
    assert (waiting.status, waiting.assignee) == (TaskStatus.ASSIGNED, sam)


@pytest.mark.parametrize("bad", ["²", "99999999999999999999", "-1"])
def test_admin_ids_typed_in_the_url_that_are_no_database_id_never_answer_500(
    root_client, demo, bad
):
    """`str.isdigit` accepts "²" (int() then fails) and digits wider than a bigint: 500 before."""
    org_chart_list = reverse("admin:organization_organization_changelist")
    assert root_client.get(org_chart_list, {"organization__id__exact": bad}).status_code != 500
    add = root_client.get(reverse("admin:organization_agent_add"), {"organization": bad})
    assert add.status_code == 200
    autocomplete = root_client.get(
        "/admin/autocomplete/",
        {
            "org_scope": bad,
            "term": "",
            "app_label": "organization",
            "model_name": "agent",
            "field_name": "senior",
        },
    )
    assert autocomplete.status_code == 200


def test_an_organizations_admin_reads_its_webhook_secret_and_can_rotate_it(bob_client, demo, rival):
    """Receivers check X-Agent-Org-Signature with the organization's webhook secret
    (docs/tasks.md): its admins read it on the organization's page (another organization's page
    is theirs to read only) and rotate it with an action."""
    from organization.models import Organization

    page = bob_client.get(reverse("admin:organization_organization_change", args=[demo.pk]))
    assert page.status_code == 200
    assert demo.webhook_secret in page.content.decode()
    other = bob_client.get(reverse("admin:organization_organization_change", args=[rival.pk]))
    assert other.status_code == 302 and rival.webhook_secret not in other.content.decode()

    old = demo.webhook_secret
    response = bob_client.post(
        reverse("admin:organization_organization_changelist"),
        {"action": "rotate_webhook_secret", "_selected_action": [demo.pk, rival.pk]},
    )
    assert response.status_code == 302
    demo.refresh_from_db()
    assert demo.webhook_secret != old and len(demo.webhook_secret) == len(old)
    assert Organization.objects.get(pk=rival.pk).webhook_secret == rival.webhook_secret
