import pytest

from collaboration.models import CollaborationSession
from organization.registry import call_tool
from tests.collaboration.conftest import human, specialists
from tests.conftest import agent_of
from tests.factories import make_agent, make_org

pytestmark = pytest.mark.django_db

# Seed 004's form of an agent's LLM config, `providers: [{module, config}]`, and what it stands for.
SEED_STYLE_AGENTS = [
    {
        "name": "a",
        "config": {
            "providers": [
                {
                    "module": "provider-anthropic",
                    "config": {"model": "claude-x", "temperature": 0.1},
                }
            ]
        },
    }
]
SEED_STYLE_CONFIG = {"provider": "anthropic", "model": "claude-x", "temperature": 0.1}


def start(client, **body):
    body.setdefault("task", "Review the payment API")
    body.setdefault("agents", specialists("security-reviewer", "perf-reviewer"))
    return client.post("/api/collaborations", body, format="json")


def test_it_starts_a_session_and_answers_202_with_its_url(acme, org_client):
    response = start(org_client(acme), mode="sequential", synthesis="merge", context={"team": 8})
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued"
    assert body["url"].endswith(f"/api/collaborations/{body['id']}")
    assert response["Location"] == body["url"]
    assert [c["agent"] for c in body["contributions"]] == ["security-reviewer", "perf-reviewer"]
    assert {c["status"] for c in body["contributions"]} == {"pending"}
    assert body["mode"] == "sequential" and body["synthesis"] == "merge"
    assert body["progress"] == {"done": 0, "total": 2}
    assert body["limits"] == {"max_parallel": 3, "agent_timeout": 300.0, "max_total_tokens": 200000}
    assert [e["name"] for e in body["events"]] == ["tool:collaborative:queued"]
    assert set(body["consensus"]) >= {
        "agents_count",
        "has_consensus",
        "agreement_score",
        "key_agreements",
        "key_disagreements",
    }


def test_defaults_are_parallel_and_coordinator(acme, org_client):
    body = start(org_client(acme)).json()
    assert (body["mode"], body["synthesis"]) == ("parallel", "coordinator")


def test_the_defaults_are_the_servers_settings(acme, org_client, settings):
    settings.COLLAB_DEFAULT_MODE = "sequential"
    settings.COLLAB_DEFAULT_SYNTHESIS = "merge"
    body = start(org_client(acme)).json()
    assert (body["mode"], body["synthesis"]) == ("sequential", "merge")
    started = call_tool(
        human(acme), "start_collaboration", {"task": "t", "agents": specialists("a", "b")}
    )
    assert (started["mode"], started["synthesis"]) == ("sequential", "merge")
    # A start that names them still gets what it named.
    body = start(org_client(acme), mode="parallel", synthesis="vote").json()
    assert (body["mode"], body["synthesis"]) == ("parallel", "vote")


def test_an_org_agent_joins_with_its_handle(acme, agent_client):
    client = agent_client(agent_of(acme, "agent-sarah"))
    response = start(client, agents=[{"agent_id": "agent-alex", "focus": "the database"}])
    assert response.status_code == 202, response.content
    contribution = response.json()["contributions"][0]
    assert contribution["agent"] == "agent-alex"
    assert contribution["name"] == "Alex"
    assert contribution["role"] == "Backend Developer"
    assert contribution["is_org_agent"] is True
    assert response.json()["created_by"] == "agent-sarah"


def test_an_offline_agent_is_refused_with_409(acme, org_client):
    response = start(org_client(acme), agents=[{"agent_id": "agent-sam"}])
    assert response.status_code == 409
    assert response.json()["code"] == "agent_offline"
    assert not CollaborationSession.objects.exists()


@pytest.mark.parametrize("handle", ["agent-nobody", "agent-theirs"])
def test_an_unknown_or_foreign_agent_is_404(acme, org_client, handle):
    make_agent(make_org("theirs"), "agent-theirs")
    response = start(org_client(acme), agents=[{"agent_id": handle}])
    assert response.status_code == 404
    assert response.json()["code"] == "agent_not_found"


@pytest.mark.parametrize(
    "body, code, field",
    [
        ({"task": ""}, "invalid", "task"),
        ({"task": None}, "invalid", "task"),
        ({"agents": []}, "invalid", "agents"),
        ({"agents": "x"}, "invalid", "agents"),
        ({"agents": specialists("a", "b", "c", "d", "e", "f")}, "limit_exceeded", "agents"),
        ({"mode": "swarm"}, "invalid", "mode"),
        ({"synthesis": "dice"}, "invalid", "synthesis"),
        ({"agents": [{"role": "x"}]}, "invalid", "agents[0].name"),
        ({"agents": [{"name": "a"}, {"name": "a"}]}, "invalid", "agents[1]"),
        (
            {"agents": [{"name": "a", "config": {"provider": "gemini"}}]},
            "invalid",
            "agents[0].config.provider",
        ),
        (
            {"agents": [{"name": "a", "config": {"temperature": 5}}]},
            "invalid",
            "agents[0].config.temperature",
        ),
        (
            {"agents": [{"name": "a", "config": {"provider": ["openai"]}}]},
            "invalid",
            "agents[0].config.provider",
        ),
        (
            {"coordinator_config": {"provider": {"name": "openai"}}},
            "invalid",
            "coordinator_config.provider",
        ),
        (
            {"agents": [{"name": "a", "config": {"api_key": "x"}}]},
            "invalid",
            "agents[0].config.api_key",
        ),
        (
            {"agents": [{"agent_id": "agent-alex", "config": {"system_prompt": "x"}}]},
            "invalid",
            "agents[0].config.system_prompt",
        ),
        ({"agents": [{"name": "a"}], "mode": "hierarchical"}, "invalid", "agents"),
        ({"coordinator_config": "fast"}, "invalid", "coordinator_config"),
        ({"context": ["x"]}, "invalid", "context"),
        ({"max_parallel": 4}, "limit_exceeded", "max_parallel"),
        ({"max_parallel": 0}, "invalid", "max_parallel"),
        ({"agent_timeout": 301}, "limit_exceeded", "agent_timeout"),
        ({"max_total_tokens": 10**9}, "limit_exceeded", "max_total_tokens"),
        ({"max_parallel": True}, "invalid", "max_parallel"),
        ({"surprise": 1}, "invalid", "surprise"),
    ],
)
def test_invalid_input_is_400_naming_the_field(acme, org_client, body, code, field):
    response = start(org_client(acme), **body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code
    assert response.json()["error"].startswith(field)


def test_context_as_json_text_is_the_object_it_holds_at_every_door(acme, org_client):
    """The schema offers `context` as an object or as JSON text (for OpenAI's strict mode):
    REST takes the text as the tool door does, under the same guard."""
    client = org_client(acme)
    response = start(client, context='{"team_size": 8}')
    assert response.status_code == 202, response.content
    assert response.json()["context"] == {"team_size": 8}
    started = call_tool(
        human(acme),
        "start_collaboration",
        {"task": "t", "agents": specialists("a"), "context": '{"team_size": 8}'},
    )
    assert started["context"] == {"team_size": 8}
    estimate = client.post(
        "/api/collaborations/estimate",
        {"task": "t", "agents": specialists("a"), "context": '{"team_size": 8}'},
        format="json",
    )
    assert estimate.status_code == 200, estimate.content
    for text, field in [
        ("[1]", "context"),
        ("not json", "context"),
        ('{"a": "\\u0000"}', "context.a"),
    ]:
        refused = start(client, context=text)
        assert refused.status_code == 400, (text, refused.content)
        assert refused.json()["code"] == "invalid"
        assert refused.json()["error"].startswith(field)


def test_a_body_that_is_not_an_object_is_400(acme, org_client):
    response = org_client(acme).post("/api/collaborations", ["x"], format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


@pytest.mark.parametrize(
    "max_parallel, answer",
    [(2.0, 2), (2, 2), ("2", "max_parallel: must be an integer."), (2.5, "must be an integer.")],
)
def test_both_doors_read_a_number_as_json_schema_does(acme, agent_client, max_parallel, answer):
    """2.0 is an integer to the published schemas, "2" and 2.5 are not: REST and the tool door
    give the same answer."""
    client = agent_client(agent_of(acme, "agent-sarah"))
    body = {"task": "t", "agents": specialists("a"), "max_parallel": max_parallel}
    rest = client.post("/api/collaborations", body, format="json")
    tool = client.post(
        "/api/agent-engine/call-tool",
        {"toolName": "start_collaboration", "params": body},
        format="json",
    )
    if isinstance(answer, int):
        assert (rest.status_code, tool.status_code) == (202, 200), (rest.content, tool.content)
        assert rest.json()["limits"]["max_parallel"] == answer
        assert tool.json()["limits"]["max_parallel"] == answer
    else:
        assert (rest.status_code, tool.status_code) == (400, 400)
        assert (rest.json()["code"], tool.json()["code"]) == ("invalid", "invalid")
        assert "max_parallel" in rest.json()["error"] and "max_parallel" in tool.json()["error"]
        assert answer in rest.json()["error"]


def test_limits_may_be_lowered_per_session(acme, org_client):
    body = start(org_client(acme), max_parallel=1, agent_timeout=2.5, max_total_tokens=500).json()
    assert body["limits"] == {"max_parallel": 1, "agent_timeout": 2.5, "max_total_tokens": 500}


def test_a_body_naming_another_agent_is_403(acme, agent_client):
    response = start(agent_client(agent_of(acme, "agent-sarah")), agentId="agent-alex")
    assert response.status_code == 403
    assert response.json()["code"] == "identity_mismatch"


def test_seed_style_provider_config_is_understood(acme, org_client):
    response = start(org_client(acme), agents=SEED_STYLE_AGENTS)
    assert response.status_code == 202, response.content
    session = CollaborationSession.objects.get()
    assert session.contributions.get().config == SEED_STYLE_CONFIG


def test_seed_style_provider_config_is_understood_at_the_tool_door_too(acme):
    """Seed 004 is a tool, and its examples give `providers: [{module, config}]`: call-tool and
    MCP take them as REST does (the tool's schema refused them: 400 invalid)."""
    coordinator = {"providers": [{"module": "provider-openai", "config": {"max_tokens": 900}}]}
    started = call_tool(
        human(acme),
        "start_collaboration",
        {"task": "t", "agents": SEED_STYLE_AGENTS, "coordinator_config": coordinator},
    )
    session = CollaborationSession.objects.get(pk=started["id"])
    assert session.contributions.get().config == SEED_STYLE_CONFIG
    assert session.coordinator_config == {"provider": "openai", "max_tokens": 900}


def test_get_returns_the_session_and_another_org_gets_404(acme, org_client):
    session_id = start(org_client(acme)).json()["id"]
    mine = org_client(acme).get(f"/api/collaborations/{session_id}")
    assert mine.status_code == 200
    assert mine.json()["id"] == session_id
    theirs = org_client(make_org("theirs")).get(f"/api/collaborations/{session_id}")
    assert theirs.status_code == 404
    assert theirs.json()["code"] == "session_not_found"


def test_a_malformed_id_is_404(acme, org_client):
    response = org_client(acme).get("/api/collaborations/not-a-uuid")
    assert response.status_code == 404
    assert response.json()["code"] == "session_not_found"


def test_an_agent_sees_only_sessions_it_started_or_is_in(acme, agent_client, org_client):
    alex, sarah = agent_of(acme, "agent-alex"), agent_of(acme, "agent-sarah")
    by_human = start(org_client(acme)).json()["id"]
    with_alex = start(org_client(acme), agents=[{"agent_id": "agent-alex"}]).json()["id"]
    by_sarah = start(agent_client(sarah)).json()["id"]
    alex_client = agent_client(alex)
    assert alex_client.get(f"/api/collaborations/{by_human}").status_code == 404
    assert alex_client.get(f"/api/collaborations/{with_alex}").status_code == 200
    assert alex_client.get(f"/api/collaborations/{by_sarah}").status_code == 404
    listed = [s["id"] for s in alex_client.get("/api/collaborations").json()["results"]]
    assert listed == [with_alex]


def test_the_list_filters_by_status_mode_and_creator(acme, org_client, agent_client):
    client = org_client(acme)
    sequential = start(client, mode="sequential").json()["id"]
    parallel = start(agent_client(agent_of(acme, "agent-sarah"))).json()["id"]
    CollaborationSession.objects.filter(pk=parallel).update(status="completed")

    def ids(query):
        response = client.get(f"/api/collaborations?{query}")
        assert response.status_code == 200, response.content
        return {s["id"] for s in response.json()["results"]}

    assert ids("") == {sequential, parallel}
    assert ids("mode=sequential") == {sequential}
    assert ids("status=completed") == {parallel}
    assert ids("created_by=agent-sarah") == {parallel}
    assert client.get("/api/collaborations?status=bogus").status_code == 400


def test_cancelling_a_queued_session_ends_it(acme, org_client):
    client = org_client(acme)
    session_id = start(client).json()["id"]
    response = client.post(f"/api/collaborations/{session_id}/cancel")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert {c["status"] for c in response.json()["contributions"]} == {"cancelled"}
    again = client.post(f"/api/collaborations/{session_id}/cancel")
    assert again.status_code == 409
    assert again.json()["code"] == "session_finished"


def test_only_the_starter_or_a_human_may_cancel(acme, agent_client):
    sarah, alex = agent_of(acme, "agent-sarah"), agent_of(acme, "agent-alex")
    session_id = start(agent_client(sarah), agents=[{"agent_id": "agent-alex"}]).json()["id"]
    response = agent_client(alex).post(f"/api/collaborations/{session_id}/cancel")
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert agent_client(sarah).post(f"/api/collaborations/{session_id}/cancel").status_code == 200


def test_the_tools_start_and_get_a_session(acme):
    caller = human(acme)
    started = call_tool(
        caller,
        "start_collaboration",
        {"task": "Pick a queue", "agents": specialists("a", "b"), "synthesis": "vote"},
    )
    assert started["success"] is True and started["status"] == "queued"
    got = call_tool(caller, "get_collaboration", {"session_id": started["id"]})
    assert got["id"] == started["id"] and got["synthesis"] == "vote"


def test_the_tools_are_reachable_through_call_tool(acme, agent_client):
    client = agent_client(agent_of(acme, "agent-sarah"))
    response = client.post(
        "/api/agent-engine/call-tool",
        {"toolName": "start_collaboration", "params": {"task": "t", "agents": specialists("a")}},
        format="json",
    )
    assert response.status_code == 200, response.content
    session_id = response.json()["id"]
    got = client.post(
        "/api/agent-engine/call-tool",
        {"toolName": "get_collaboration", "params": {"session_id": session_id}},
        format="json",
    )
    assert got.status_code == 200
    missing = client.post(
        "/api/agent-engine/call-tool",
        {"toolName": "get_collaboration", "params": {"session_id": "nope"}},
        format="json",
    )
    assert missing.status_code == 404
    assert missing.json()["code"] == "session_not_found"


@pytest.mark.parametrize(
    "params, status, code, tool_code",
    [
        ({"agents": [{"agent_id": "agent-sam"}]}, 409, "agent_offline", "agent_offline"),
        ({"agents": [{"agent_id": "agent-nobody"}]}, 404, "agent_not_found", "agent_not_found"),
        ({"max_parallel": 4}, 400, "limit_exceeded", "limit_exceeded"),
        (
            {"agents": specialists("a", "b", "c", "d", "e", "f")},
            400,
            "limit_exceeded",
            "limit_exceeded",
        ),
        # The registry checks a tool's input schema (its enums) first, with the same code as REST.
        ({"mode": "swarm"}, 400, "invalid", "invalid"),
        ({"agents": [{"name": "a", "config": {"temperature": 5}}]}, 400, "invalid", "invalid"),
    ],
)
def test_the_tool_door_refuses_what_rest_refuses(
    acme, agent_client, params, status, code, tool_code
):
    client = agent_client(agent_of(acme, "agent-sarah"))
    params = {"task": "t", "agents": specialists("a"), **params}
    rest = client.post("/api/collaborations", params, format="json")
    tool = client.post(
        "/api/agent-engine/call-tool",
        {"toolName": "start_collaboration", "params": params},
        format="json",
    )
    assert (rest.status_code, rest.json()["code"]) == (status, code)
    assert (tool.status_code, tool.json()["code"]) == (status, tool_code)
    assert not CollaborationSession.objects.exists()


LONG = "You review payments code with great care. " * 230  # ~9,900 characters


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "body",
    [
        # An ad-hoc specialist's own system_prompt is sent with each of its calls.
        {"agents": [{"name": n, "config": {"system_prompt": LONG * 2}} for n in ("a", "b", "c")]},
        # A hierarchical plan's prompt lists every specialist with its focus.
        {
            "mode": "hierarchical",
            "agents": [
                {"name": "coord"},
                *({"name": n, "focus": LONG} for n in ("a", "b", "c", "d")),
            ],
        },
    ],
    ids=["system_prompt", "plan_roster"],
)
def test_the_estimate_counts_every_prompt_the_run_sends(acme, org_client, fake_llm, settings, body):
    """What the run holds for its calls (each one's worst case) is never more than the
    estimate: the texts it sends are counted."""
    from decimal import Decimal

    from django.db.models import Sum

    from collaboration import runner
    from costs.budgets import budget_set
    from costs.models import UsageRecord

    settings.LLM_PRICES = {"openai/fake-model": {"input": Decimal(100), "output": Decimal(1)}}
    budget_set(caller=human(acme), scope="organization", limit_usd="100000000")
    body = {"task": "t", "synthesis": "merge", **body}
    client = org_client(acme)
    estimate = client.post("/api/collaborations/estimate", body, format="json")
    assert estimate.status_code == 200, estimate.content
    session_id = client.post("/api/collaborations", body, format="json").json()["id"]
    runner.run_session(session_id)
    held = UsageRecord.objects.filter(session_id=session_id).aggregate(s=Sum("reserved_usd"))["s"]
    assert held <= Decimal(estimate.json()["estimated_cost_usd"]), (held, estimate.json())


def test_an_admin_with_the_longest_username_django_allows_starts_a_session(acme, offline):
    """`user:<username>` is who started it: Django's usernames hold 150 characters, so the
    label 155 (it overflowed the column: a 500). Their session budget says so too."""
    from decimal import Decimal

    from collaboration.services import session_create
    from costs.models import Budget
    from organization.caller import Caller
    from tests.factories import make_admin_user

    user = make_admin_user(acme, username="u" * 150)
    session = session_create(
        caller=Caller(organization=acme, user=user),
        payload={"task": "t", "agents": specialists("a"), "max_cost_usd": "1"},
    )
    assert session.created_by == "user:" + "u" * 150
    budget = Budget.objects.get(session=session)
    assert (budget.created_by, budget.limit_usd) == (session.created_by, Decimal(1))
