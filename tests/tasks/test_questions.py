"""Agents ask humans (issue 37 §2): `POST /api/decisions`, the `ask_human` and `get_decision`
tools, and the answer reaching the agent."""

import pytest

from tasks.models import DecisionStatus, HumanDecision, InboxItem, Task, TaskStatus
from tests.conftest import KeyClient
from tests.factories import make_key, make_org
from tests.tasks.conftest import assert_error, create, post
from tests.tasks.test_tools import call

pytestmark = pytest.mark.django_db

URL = "/api/decisions"


def held_by_sarah(cast) -> int:
    return create(cast.client(cast.sarah), agent_id="agent-sarah").json()["id"]


def ask(cast, task_id, **body):
    body = {"kind": "question", "task": task_id, "question": "Which region?", **body}
    return post(cast.client(cast.sarah), URL, body)


def result_of(response) -> dict:
    assert response.status_code == 200, response.content
    body = response.json()
    return body.get("result", body)


def test_an_agent_asks_about_a_task_it_holds(cast):
    task_id = held_by_sarah(cast)
    response = ask(cast, task_id, options=["eu-west", "us-east"])
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["kind"] == "question"
    assert (body["task"], body["requested_by"]) == (task_id, "agent-sarah")
    assert (body["question"], body["options"]) == ("Which region?", ["eu-west", "us-east"])
    assert (body["status"], body["policy"], body["action"]) == ("pending", None, None)
    # The task stays with the agent, as it was.
    task = Task.objects.get(pk=task_id)
    assert (task.assignee, task.status) == (cast.sarah, TaskStatus.ASSIGNED)


def test_a_question_is_about_a_task_the_agent_holds(cast):
    task_id = held_by_sarah(cast)
    alex = cast.client(cast.alex)
    theirs = create(alex, agent_id="agent-alex").json()["id"]
    assert_error(ask(cast, theirs), 404, "task_not_found")
    post(cast.client(cast.sarah), f"/api/tasks/{task_id}/delegate", {"agent_id": "agent-alex"})
    # Sarah still sees the task she passed on, but no longer holds it.
    assert_error(ask(cast, task_id), 403, "task_not_held")
    other = KeyClient(make_key(make_org("other")))
    assert_error(post(other, URL, {"task": task_id, "question": "?"}), 403, "agent_required")


@pytest.mark.parametrize(
    "body",
    [
        {"options": [str(i) for i in range(9)]},
        {"question": ""},
        {"question": "x" * 2001},
        {"options": ["x" * 201]},
        {"kind": "approval"},
    ],
)
def test_a_question_is_bounded(cast, body):
    assert_error(ask(cast, held_by_sarah(cast), **body), 400, "invalid")


def test_a_human_may_not_ask_over_the_api(cast):
    assert_error(post(cast.human, URL, {"task": 1, "question": "?"}), 403, "agent_required")


def test_the_answer_is_one_of_the_options_and_reaches_the_agent(cast):
    decision = ask(cast, held_by_sarah(cast), options=["eu-west", "us-east"]).json()
    answer_url = f"{URL}/{decision['id']}/answer"
    assert_error(post(cast.human, answer_url, {"answer": "mars"}), 400, "invalid", "eu-west")
    assert_error(
        post(cast.client(cast.sarah), answer_url, {"answer": "eu-west"}), 403, "human_required"
    )

    response = post(cast.human, answer_url, {"answer": "eu-west"})
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["answer"]) == ("answered", "eu-west")
    item = InboxItem.objects.get(agent=cast.sarah, kind="decision")
    assert "eu-west" in item.message
    assert_error(post(cast.human, answer_url, {"answer": "us-east"}), 409, "decision_closed")


def test_a_question_is_answered_not_approved_and_an_approval_not_answered(cast):
    decision = ask(cast, held_by_sarah(cast)).json()
    assert_error(post(cast.human, f"{URL}/{decision['id']}/approve"), 409, "not_an_approval")
    assert_error(post(cast.human, f"{URL}/{decision['id']}/reject"), 409, "not_an_approval")


def test_ask_human_and_get_decision_over_call_tool(cast):
    sarah = cast.client(cast.sarah)
    task_id = held_by_sarah(cast)
    asked = result_of(
        call(sarah, "ask_human", task=task_id, question="Ship today?", options=["yes", "no"])
    )
    assert (asked["kind"], asked["status"]) == ("question", "pending")

    post(cast.human, f"{URL}/{asked['id']}/answer", {"answer": "yes"})
    got = result_of(call(sarah, "get_decision", decision_id=asked["id"]))
    assert (got["status"], got["answer"]) == ("answered", "yes")
    assert HumanDecision.objects.get(pk=asked["id"]).status == DecisionStatus.ANSWERED
    # An agent that cannot see it: 404, as for a task.
    response = call(cast.client(cast.alex), "get_decision", decision_id=asked["id"])
    assert_error(response, 404, "decision_not_found")


def test_ask_human_validates_like_the_rest_door(cast):
    sarah = cast.client(cast.sarah)
    task_id = held_by_sarah(cast)
    response = call(
        sarah, "ask_human", task=task_id, question="?", options=[str(i) for i in range(9)]
    )
    assert_error(response, 400, "invalid", "options")


def test_an_agent_has_a_bounded_number_of_decisions_pending(cast, settings):
    settings.DECISIONS_MAX_PENDING_PER_AGENT = 2
    task_id = held_by_sarah(cast)
    assert ask(cast, task_id).status_code == 201
    assert ask(cast, task_id).status_code == 201
    assert_error(ask(cast, task_id), 409, "too_many_pending_decisions")
    first = HumanDecision.objects.filter(requested_by=cast.sarah).first()
    post(cast.human, f"{URL}/{first.pk}/answer", {"answer": "eu"})
    assert ask(cast, task_id).status_code == 201
