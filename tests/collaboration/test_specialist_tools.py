"""Collaboration specialists with read-only registry tools (issue 11 §3): who may give them,
as whom they run, and what the session shows of their calls."""

import json

import pytest

from collaboration.models import CollaborationSession
from organization.caller import caller_for_agent
from organization.registry import REGISTRY, call_tool
from tests.collaboration.conftest import calls_then_answers, human, run, specialists
from tests.collaboration.starts import started
from tests.conftest import agent_of
from tests.fake_llm import Reply, ToolUse

ROSTER = "get_organization_roster"
ANALYST = {"name": "analyst", "config": {"tools": [ROSTER]}}  # an ad-hoc specialist with the roster


def start(client, agents, **body):
    body = {
        "task": "Who should own the index migration?",
        "synthesis": "merge",
        "agents": agents,
        **body,
    }
    return client.post("/api/collaborations", body, format="json")


def roster_then_answer(fake, agent, answer="Alex should own it.\nVERDICT: yes\nCONFIDENCE: 0.9"):
    fake.on(
        agent=agent,
        replies=[
            Reply(
                "Checking the roster.",
                tool_calls=[ToolUse(ROSTER, {"filter": "all"}, id="r1")],
                prompt_tokens=40,
                completion_tokens=10,
            ),
            Reply(answer, prompt_tokens=90, completion_tokens=12),
        ],
    )


@pytest.mark.django_db
class TestWhoMayGiveWhichTools:
    @pytest.mark.parametrize(
        "tools, code, message",
        [
            (
                ["create_task"],
                "tool_not_read_only",
                "agents[0].config.tools[0]: create_task writes",
            ),
            (
                [ROSTER, "start_collaboration"],
                "tool_not_read_only",
                "agents[0].config.tools[1]: start_collaboration writes",
            ),
            (
                ["no_such_tool"],
                "unknown_tool",
                "agents[0].config.tools[0]: unknown tool 'no_such_tool'",
            ),
            (
                [ROSTER, ROSTER],
                "invalid",
                "agents[0].config.tools[1]: get_organization_roster is listed twice",
            ),
            (ROSTER, "invalid", "agents[0].config.tools: must be a list of tool names"),
        ],
    )
    def test_a_writing_unknown_or_malformed_tool_list_is_400(
        self, acme, org_client, tools, code, message
    ):
        response = start(org_client(acme), [{"name": "analyst", "config": {"tools": tools}}])
        assert response.status_code == 400, response.content
        assert response.json()["code"] == code
        assert response.json()["error"].startswith(message)
        assert not CollaborationSession.objects.exists()

    def test_an_org_agent_is_refused_a_writing_tool_too(self, acme, org_client):
        response = start(
            org_client(acme),
            [{"agent_id": "agent-alex", "config": {"tools": ["update_task_status"]}}],
        )
        assert response.status_code == 400
        assert response.json()["code"] == "tool_not_read_only"

    def test_the_coordinators_config_takes_no_tools(self, acme, org_client):
        response = start(org_client(acme), specialists("a"), coordinator_config={"tools": [ROSTER]})
        assert response.status_code == 400
        assert response.json() == {
            "success": False,
            "code": "invalid",
            "error": "coordinator_config.tools: unknown field.",
        }

    def test_a_hierarchical_coordinator_plans_without_tools(self, acme, org_client):
        agents = [{"name": "lead", "config": {"tools": [ROSTER]}}, {"name": "analyst"}]
        response = start(org_client(acme), agents, mode="hierarchical")
        assert response.status_code == 400
        assert response.json()["code"] == "invalid"
        assert response.json()["error"].startswith("agents[0].config.tools: the hierarchical")

    def test_an_agent_may_not_give_a_colleague_tools(self, acme, agent_client):
        sarah = agent_client(agent_of(acme, "agent-sarah"))
        response = start(sarah, [{"agent_id": "agent-alex", "config": {"tools": [ROSTER]}}])
        assert response.status_code == 403
        assert response.json()["code"] == "tools_forbidden"
        # Herself, or an ad-hoc specialist (which runs as her): both fine.
        assert (
            start(
                sarah,
                [
                    {"agent_id": "agent-sarah", "config": {"tools": [ROSTER]}},
                    {"name": "analyst", "config": {"tools": [ROSTER]}},
                ],
            ).status_code
            == 202
        )

    def test_the_tools_are_shown_on_the_contribution(self, acme, org_client):
        response = start(
            org_client(acme),
            [{"name": "analyst", "config": {"tools": [ROSTER]}}, {"name": "plain"}],
        )
        assert response.status_code == 202, response.content
        contributions = response.json()["contributions"]
        assert [(c["tools"], c["turns"]) for c in contributions] == [([ROSTER], []), ([], [])]

    def test_the_start_collaboration_tool_takes_tools_too(self, acme):
        body = call_tool(
            human(acme),
            "start_collaboration",
            {"task": "t", "agents": [{"name": "analyst", "config": {"tools": [ROSTER]}}]},
        )
        assert body["contributions"][0]["tools"] == [ROSTER]
        # The tool's schema offers `tools` on an agent's config only.
        schema = REGISTRY["start_collaboration"].input_schema
        agent_config = schema["properties"]["agents"]["items"]["properties"]["config"]
        assert agent_config["properties"]["tools"]["type"] == "array"
        assert "tools" not in schema["properties"]["coordinator_config"]["properties"]


@pytest.mark.django_db(transaction=True)
class TestSpecialistsAtWork:
    def test_an_org_agent_calls_a_tool_as_itself_and_the_session_shows_it(
        self, acme, fake_llm, org_client
    ):
        roster_then_answer(fake_llm, "agent-alex")
        client = org_client(acme)
        response = start(
            client, [{"agent_id": "agent-alex", "config": {"tools": [ROSTER]}}, {"name": "plain"}]
        )
        session = run(CollaborationSession.objects.get(pk=response.json()["id"]))
        assert session.status == "completed", session.error

        body = client.get(f"/api/collaborations/{session.pk}").json()
        alex, plain = body["contributions"]
        assert alex["status"] == "completed"
        assert alex["response"].startswith("Alex should own it.")
        assert alex["tools"] == [ROSTER]
        assert [(t["kind"], t.get("name"), t.get("status")) for t in alex["turns"]] == [
            ("model", None, None),
            ("tool_call", ROSTER, "ok"),
            ("model", None, None),
        ]
        call = alex["turns"][1]
        assert (call["id"], call["arguments"]) == ("r1", {"filter": "all"})
        assert call["result"]["agent_context"]["id"] == "agent-alex"  # as Alex himself
        # Tokens: both of Alex's model calls, and the session's total over everyone.
        assert (alex["prompt_tokens"], alex["completion_tokens"], alex["tokens_used"]) == (
            130,
            22,
            152,
        )
        assert alex["attempts"] == 2
        assert body["metadata"]["agent_tokens"] == 152 + plain["tokens_used"]
        assert body["metadata"]["total_tokens"] == body["metadata"]["agent_tokens"]  # merge
        # The model was offered the tool; the plain specialist exactly as before, without any.
        first, second = fake_llm.calls_for(agent="agent-alex")
        assert first.tool_names == [ROSTER] and second.tool_results[0]["tool_call_id"] == "r1"
        (plain_call,) = fake_llm.calls_for(agent="plain")
        assert "tools" not in plain_call.body and plain["turns"] == []
        assert json.loads(second.tool_results[0]["content"]) == call["result"]

    @pytest.mark.parametrize("provider", ["openai", "anthropic"])
    def test_an_ad_hoc_specialist_runs_as_the_agent_that_started_the_session(
        self, acme, fake_llm, agent_client, provider
    ):
        roster_then_answer(fake_llm, "analyst")
        sarah = agent_client(agent_of(acme, "agent-sarah"))
        response = start(
            sarah,
            [
                {
                    "name": "analyst",
                    "config": {"provider": provider, "model": "m-1", "tools": [ROSTER]},
                }
            ],
        )
        session = run(CollaborationSession.objects.get(pk=response.json()["id"]))
        assert session.status == "completed", session.error
        (analyst,) = sarah.get(f"/api/collaborations/{session.pk}").json()["contributions"]
        call = analyst["turns"][1]
        assert call["result"]["agent_context"]["id"] == "agent-sarah"
        assert {c.api for c in fake_llm.calls_for(agent="analyst")} == {provider}

    def test_an_ad_hoc_specialist_of_an_organization_key_sees_the_whole_organization(
        self, acme, fake_llm, org_client
    ):
        roster_then_answer(fake_llm, "analyst")
        response = start(org_client(acme), [{"name": "analyst", "config": {"tools": [ROSTER]}}])
        session = run(CollaborationSession.objects.get(pk=response.json()["id"]))
        result = session.contributions.get().turns[1]["result"]
        assert result["agent_context"] is None
        assert sorted(c["id"] for c in result["colleagues"]) == [
            "agent-alex",
            "agent-sam",
            "agent-sarah",
        ]

    def test_a_refused_call_reaches_the_model_and_the_specialist_still_answers(
        self, acme, fake_llm
    ):
        calls_then_answers(
            fake_llm,
            "analyst",
            ToolUse(ROSTER, {"filter": "by_expertise"}, id="bad"),
            "Answered without it.\nVERDICT: no\nCONFIDENCE: 0.5",
        )
        session = run(started(acme, [ANALYST], synthesis="merge"))
        contribution = session.contributions.get()
        assert contribution.status == "completed"
        assert contribution.turns[1]["status"] == "error"
        assert contribution.turns[1]["error"]["code"] == "invalid_filter"
        refusal = json.loads(fake_llm.calls_for(agent="analyst")[1].tool_results[0]["content"])
        assert refusal == contribution.turns[1]["error"]

    def test_past_max_turns_the_specialist_fails_and_keeps_what_it_spent(
        self, acme, fake_llm, settings
    ):
        settings.COLLAB_AGENT_MAX_TURNS = 2
        fake_llm.on(
            agent="analyst",
            replies=Reply(tool_calls=[ToolUse(ROSTER)], prompt_tokens=5, completion_tokens=5),
        )
        session = run(started(acme, [ANALYST, {"name": "plain"}], synthesis="merge"))
        analyst = session.contributions.get(agent_key="analyst")
        assert analyst.status == "failed"
        assert analyst.error.startswith("no answer after 2 model turns (COLLAB_AGENT_MAX_TURNS)")
        assert (analyst.tokens_used, len(fake_llm.calls_for(agent="analyst"))) == (20, 2)
        assert [t["kind"] for t in analyst.turns] == ["model", "tool_call", "model"]
        assert session.status == "partial"
        plain = session.contributions.get(agent_key="plain")
        assert session.metadata["total_tokens"] == 20 + plain.tokens_used

    def test_a_colleague_in_the_session_does_not_read_what_the_tools_showed_another_agent(
        self, acme, fake_llm, org_client, agent_client
    ):
        roster_then_answer(fake_llm, "agent-alex")
        response = start(
            org_client(acme),
            [
                {"agent_id": "agent-alex", "config": {"tools": [ROSTER]}},
                {"agent_id": "agent-sarah"},
            ],
        )
        session = run(CollaborationSession.objects.get(pk=response.json()["id"]))
        url = f"/api/collaborations/{session.pk}"

        def alex_call(body):
            return body["contributions"][0]["turns"][1]

        for reader in (org_client(acme), agent_client(agent_of(acme, "agent-alex"))):
            assert (
                alex_call(reader.get(url).json())["result"]["agent_context"]["id"] == "agent-alex"
            )
        sarah = agent_of(acme, "agent-sarah")
        for seen in (
            alex_call(agent_client(sarah).get(url).json()),
            alex_call(
                call_tool(
                    caller_for_agent(sarah), "get_collaboration", {"session_id": str(session.pk)}
                )
            ),
        ):
            assert "result" not in seen
            assert (seen["result_hidden"], seen["name"], seen["status"]) == (True, ROSTER, "ok")

    def test_a_specialist_that_times_out_keeps_its_turns_and_the_tokens_it_spent(
        self, acme, fake_llm
    ):
        fake_llm.on(
            agent="analyst",
            replies=[
                Reply(tool_calls=[ToolUse(ROSTER, id="r1")], prompt_tokens=8, completion_tokens=2),
                Reply(hang=True),
            ],
        )
        session = run(
            started(acme, [ANALYST, {"name": "plain"}], synthesis="merge", agent_timeout=1.5)
        )
        analyst = session.contributions.get(agent_key="analyst")
        assert analyst.status == "timed_out"
        assert [(t["kind"], t.get("status")) for t in analyst.turns] == [
            ("model", None),
            ("tool_call", "ok"),
        ]
        assert analyst.tokens_used == 10
        plain = session.contributions.get(agent_key="plain")
        assert session.metadata["total_tokens"] == 10 + plain.tokens_used

    def test_a_resumed_session_does_not_run_a_recorded_call_again(self, acme, fake_llm):
        """A worker died after the call was recorded: the re-run goes on from the turns."""
        session = started(acme, [ANALYST], synthesis="merge")
        turns = [
            {
                "kind": "model",
                "index": 0,
                "text": "",
                "stop_reason": "tool_calls",
                "tool_calls": [{"id": "r1", "name": ROSTER, "arguments": {}}],
                "prompt_tokens": 11,
                "completion_tokens": 4,
                "attempts": 1,
                "provider": "openai",
                "model": "fake-model",
            },
            {
                "kind": "tool_call",
                "index": 1,
                "id": "r1",
                "name": ROSTER,
                "arguments": {},
                "status": "ok",
                "result": {"recorded": "before the worker died"},
            },
        ]
        session.contributions.update(
            status="running", turns=turns, prompt_tokens=11, completion_tokens=4, tokens_used=15
        )
        CollaborationSession.objects.filter(pk=session.pk).update(status="running", attempts=1)
        fake_llm.on(agent="analyst", replies=Reply("Done.", prompt_tokens=30, completion_tokens=3))

        session = run(session)
        analyst = session.contributions.get()
        assert (session.attempts, analyst.status) == (2, "completed")
        (call,) = fake_llm.calls_for(agent="analyst")  # one model call: the turn after the tool's
        assert json.loads(call.tool_results[0]["content"]) == {"recorded": "before the worker died"}
        assert analyst.turns[:2] == turns and analyst.turns[2]["text"] == "Done."
        assert analyst.tokens_used == 15 + 33
        assert session.metadata["total_tokens"] == 48

    def test_the_offline_provider_runs_a_specialist_with_tools(self, acme, offline):
        alex_with_roster = {"agent_id": "agent-alex", "config": {"tools": [ROSTER]}}
        session = run(started(acme, [alex_with_roster], synthesis="merge"))
        alex = session.contributions.get()
        assert (session.status, alex.status, alex.tokens_used) == ("completed", "completed", 0)
        assert [(t["kind"], t.get("status")) for t in alex.turns] == [
            ("model", None),
            ("tool_call", "ok"),
            ("model", None),
        ]
        assert alex.turns[1]["result"]["agent_context"]["id"] == "agent-alex"
        assert f"- Consulted {ROSTER}: answered." in alex.response
        assert alex.verdict in ("yes", "no")
