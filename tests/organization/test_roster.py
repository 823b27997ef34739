import pytest

from tests.conftest import agent_of
from tests.factories import give_tasks, make_agent, make_team

pytestmark = pytest.mark.django_db


def roster(client, **params):
    return client.get("/api/roster", params)


def test_it_returns_the_callers_context_and_colleagues(demo, agent_client):
    sarah = agent_of(demo, "agent-sarah")
    response = roster(agent_client(sarah))
    assert response.status_code == 200
    body = response.json()
    assert body["agent_context"] == {
        "id": "agent-sarah",
        "name": "Sarah",
        "role": "Frontend Developer",
        "team": "Development",
        "seniorId": "agent-alice",
        "expertise": ["React", "TypeScript", "CSS"],
        "status": "active",
        "current_workload": 3,
        "workload_capacity": 5,
        "availability_until": None,
    }
    ids = [c["id"] for c in body["colleagues"]]
    assert "agent-sarah" not in ids
    assert len(ids) == 6
    alex = next(c for c in body["colleagues"] if c["id"] == "agent-alex")
    assert alex == {
        "id": "agent-alex",
        "name": "Alex",
        "role": "Backend Developer",
        "team": "Development",
        "seniorId": "agent-alice",
        "expertise": ["Node.js", "PostgreSQL", "API Design"],
        "status": "idle",
        "current_workload": 1,
        "workload_capacity": 5,
        "availability_until": None,
    }


def test_status_follows_the_seed_rule(demo, agent_client):
    body = roster(agent_client(agent_of(demo, "agent-sarah"))).json()
    status = {c["id"]: c["status"] for c in body["colleagues"]}
    assert status == {
        "agent-alice": "busy",  # 4
        "agent-sam": "offline",  # paused
        "agent-alex": "idle",  # 1
        "agent-jordan": "busy",  # 5
        "agent-database-lead": "busy",  # 5
        "agent-taylor": "active",  # 3
    }


def test_workload_counts_only_held_statuses(db, agent_client):
    from tests.factories import make_org

    org = make_org()
    me, other = make_agent(org), make_agent(org)
    give_tasks(other, 1, "assigned")
    give_tasks(other, 1, "in_progress")
    give_tasks(other, 1, "blocked")
    for status in ("queued", "completed", "failed", "cancelled", "escalated"):
        give_tasks(other, 1, status)
    body = roster(agent_client(me)).json()
    assert body["colleagues"][0]["current_workload"] == 3


def test_my_team_lists_only_teammates(demo, agent_client):
    body = roster(agent_client(agent_of(demo, "agent-sarah")), filter="my_team").json()
    assert [c["id"] for c in body["colleagues"]] == ["agent-alex"]


def test_my_team_of_an_agent_without_team_is_empty(demo, agent_client):
    loner = make_agent(demo, "agent-loner")
    body = roster(agent_client(loner), filter="my_team").json()
    assert body["colleagues"] == []


def test_available_means_idle_or_active(demo, agent_client):
    body = roster(agent_client(agent_of(demo, "agent-sarah")), filter="available").json()
    assert sorted(c["id"] for c in body["colleagues"]) == ["agent-alex", "agent-taylor"]


def test_by_expertise_is_exact_and_case_sensitive(demo, agent_client):
    client = agent_client(agent_of(demo, "agent-sarah"))
    body = roster(client, filter="by_expertise", expertise="PostgreSQL").json()
    assert sorted(c["id"] for c in body["colleagues"]) == ["agent-alex", "agent-database-lead"]
    assert roster(client, filter="by_expertise", expertise="postgresql").json()["colleagues"] == []
    assert roster(client, filter="by_expertise", expertise="SQL").json()["colleagues"] == []


def test_ignore_case_is_the_opt_in_forgiving_match(demo, agent_client):
    client = agent_client(agent_of(demo, "agent-sarah"))
    body = roster(
        client, filter="by_expertise", expertise="postgresql", expertise_match="ignore_case"
    ).json()
    assert sorted(c["id"] for c in body["colleagues"]) == ["agent-alex", "agent-database-lead"]


def test_by_expertise_without_expertise_is_400(demo, agent_client):
    response = roster(agent_client(agent_of(demo, "agent-sarah")), filter="by_expertise")
    assert response.status_code == 400
    assert response.json()["success"] is False
    assert response.json()["code"] == "invalid_filter"
    assert "expertise" in response.json()["error"]


def test_unknown_filter_is_400(demo, agent_client):
    response = roster(agent_client(agent_of(demo, "agent-sarah")), filter="everyone")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


def test_an_organization_key_names_whose_roster_it_is(demo, org_client):
    body = roster(org_client(demo), agent="agent-alex").json()
    assert body["agent_context"]["id"] == "agent-alex"
    assert "agent-alex" not in [c["id"] for c in body["colleagues"]]


def test_an_organization_key_cannot_name_another_orgs_agent(demo, other_org, org_client):
    make_agent(other_org, "agent-zed")
    response = roster(org_client(demo), agent="agent-zed")
    assert response.status_code == 404
    assert response.json()["code"] == "agent_not_found"


def test_agents_of_another_organization_are_never_listed(demo, other_org, agent_client):
    make_agent(other_org, "agent-outsider")
    body = roster(agent_client(agent_of(demo, "agent-sarah"))).json()
    assert "agent-outsider" not in [c["id"] for c in body["colleagues"]]


def test_roster_runs_in_constant_queries(db, agent_client, django_assert_max_num_queries):
    from tests.factories import make_org

    org = make_org()
    team = make_team(org)
    me = make_agent(org, team=team)
    client = agent_client(me)
    roster(client)  # warm up
    with django_assert_max_num_queries(3):
        roster(client)
    for n in range(60):
        agent = make_agent(org, team=team, expertise=["X"])
        give_tasks(agent, n % 4)
    with django_assert_max_num_queries(3):
        assert len(roster(client).json()["colleagues"]) == 60


def test_no_key_is_401(anon_client, demo):
    response = anon_client.get("/api/roster")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_required"


def test_a_wrong_key_is_401(demo):
    from tests.conftest import KeyClient

    response = KeyClient("ao_deadbeef0000_notarealsecret").get("/api/roster")
    assert response.status_code == 401


def test_an_organization_key_sees_everyone_unless_it_names_an_agent(demo, org_client):
    client = org_client(demo)
    everyone = roster(client).json()
    assert everyone["agent_context"] is None
    assert len(everyone["colleagues"]) == 7
    jordan = roster(client, agent="agent-jordan", filter="my_team").json()
    assert jordan["agent_context"]["id"] == "agent-jordan"
    assert sorted(c["id"] for c in jordan["colleagues"]) == ["agent-database-lead", "agent-sam"]


def test_an_organization_key_naming_an_unknown_agent_is_404(demo, org_client):
    response = roster(org_client(demo), agent="agent-nobody")
    assert response.status_code == 404
    assert response.json()["code"] == "agent_not_found"
    assert response.json()["code"] == "agent_not_found"


def test_an_agent_key_cannot_ask_for_another_agents_roster(demo, agent_client):
    body = roster(agent_client(agent_of(demo, "agent-sarah")), agent="agent-jordan").json()
    assert body["agent_context"]["id"] == "agent-sarah"


def test_the_tool_and_the_endpoint_answer_the_same(demo, agent_client):
    client = agent_client(agent_of(demo, "agent-sarah"))
    params = {"filter": "by_expertise", "expertise": "CSS"}
    rest = roster(client, **params).json()
    tool = client.post(
        "/api/agent-engine/call-tool",
        {"toolName": "get_organization_roster", "params": params},
        format="json",
    ).json()
    assert rest == tool
    assert [c["id"] for c in rest["colleagues"]] == ["agent-taylor"]


def test_the_number_of_queries_is_the_same_at_any_size(demo, agent_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = agent_client(agent_of(demo, "agent-sarah"))

    def queries() -> int:
        roster(client)  # the first call records the key's last use
        with CaptureQueriesContext(connection) as ctx:
            assert roster(client).status_code == 200
        return len(ctx.captured_queries)

    small = queries()
    team = make_team(demo)
    for _ in range(60):
        give_tasks(make_agent(demo, team=team, expertise=["AWS"]), 2)
    assert queries() == small == 2


def call_roster_tool(client, **params):
    return client.post(
        "/api/agent-engine/call-tool",
        {"toolName": "get_organization_roster", "params": params},
        format="json",
    )


# Both doors of the one service refuse the same requests with the same code (REST validates the
# query string with its serializer, the tool its params with the registry's JSON schema; the
# service's own rules answer `invalid_filter` at both).
@pytest.mark.parametrize(
    "params, rest_code, tool_code, named",
    [
        ({"filter": "everyone"}, "invalid", "invalid", "filter"),
        ({"expertise_match": "fuzzy"}, "invalid", "invalid", "expertise_match"),
        ({"filter": "by_expertise"}, "invalid_filter", "invalid_filter", "expertise"),
        (
            {"filter": "by_expertise", "expertise": ""},
            "invalid_filter",
            "invalid_filter",
            "expertise",
        ),
    ],
)
def test_both_doors_refuse_bad_roster_requests(
    demo, agent_client, params, rest_code, tool_code, named
):
    client = agent_client(agent_of(demo, "agent-sarah"))
    for response, code in (
        (roster(client, **params), rest_code),
        (call_roster_tool(client, **params), tool_code),
    ):
        assert response.status_code == 400, response.content
        assert response.json()["code"] == code
        assert named in response.json()["error"]


def test_my_team_for_an_organization_key_needs_an_agent_at_both_doors(demo, org_client):
    client = org_client(demo)
    for response in (roster(client, filter="my_team"), call_roster_tool(client, filter="my_team")):
        assert response.status_code == 400, response.content
        assert response.json()["code"] == "invalid_filter"
    tool = call_roster_tool(client, filter="my_team", agent="agent-jordan").json()
    assert tool == roster(client, filter="my_team", agent="agent-jordan").json()
    assert sorted(c["id"] for c in tool["colleagues"]) == ["agent-database-lead", "agent-sam"]


def test_the_tool_with_an_organization_key_refuses_another_orgs_agent(demo, other_org, org_client):
    make_agent(other_org, "agent-zed")
    response = call_roster_tool(org_client(demo), agent="agent-zed")
    assert response.status_code == 404
    assert response.json()["code"] == "agent_not_found"


def test_an_agent_key_naming_another_agent_gets_its_own_roster_at_both_doors(demo, agent_client):
    client = agent_client(agent_of(demo, "agent-sarah"))
    tool = call_roster_tool(client, agent="agent-jordan").json()
    assert tool["agent_context"]["id"] == "agent-sarah"
    assert tool == roster(client, agent="agent-jordan").json()
