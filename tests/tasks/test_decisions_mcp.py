"""Decisions over MCP (issue 37 §2): a gated move's result is the 202 body, `ask_human` and
`get_decision` answer as at call-tool."""

import pytest

from tasks import services
from tasks.models import PolicyTrigger, Task
from tests.factories import make_key
from tests.organization.mcp.live import calls, ok, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_gated_move_and_a_question_over_mcp(live):
    cast, url = live
    services.policy_create(
        org=cast.org, name="Cross-team waits", trigger=PolicyTrigger.CROSS_TEAM_DELEGATION
    )
    sarah = make_key(cast.org, cast.sarah)
    (made,) = run(
        calls(url, sarah, ("create_task", {"title": "Migrate", "agent_id": "agent-sarah"}))
    )
    task_id = ok(made)["id"]

    delegated, asked = run(
        calls(
            url,
            sarah,
            ("delegate_task", {"task_id": task_id, "agent_id": "agent-morgan"}),
            ("ask_human", {"task": task_id, "question": "Which region?", "options": ["eu", "us"]}),
        )
    )
    waiting = ok(delegated)
    assert waiting["status"] == "awaiting_approval"
    assert waiting["decision"]["action"]["name"] == "delegate_task"
    assert Task.objects.get(pk=task_id).assignee == cast.sarah
    question = ok(asked)
    assert (question["kind"], question["options"]) == ("question", ["eu", "us"])

    (got,) = run(calls(url, sarah, ("get_decision", {"decision_id": question["id"]})))
    assert ok(got)["status"] == "pending"
