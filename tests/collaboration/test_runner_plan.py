"""The hierarchical coordinator's plan as the runner uses it."""

import json

import pytest

from tests.collaboration.conftest import run
from tests.collaboration.starts import hierarchical
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def coordinator_plans(fake, assignments: dict[str, str], plan: str | None = None) -> None:
    """The coordinator answers this plan: {agent: subtask}, after its paragraph if it has one."""
    body = {} if plan is None else {"plan": plan}
    body["assignments"] = [{"agent": a, "subtask": s} for a, s in assignments.items()]
    fake.on(purpose="plan", replies=Reply(json.dumps(body)))


def test_the_coordinators_own_focus_is_in_its_planning_prompt(acme, fake_llm):
    session = run(hierarchical(acme, "coord", "backend", "frontend", synthesis="merge"))
    assert session.status == "completed", session.error
    plan = fake_llm.calls_for(purpose="plan")[0]
    assert "## Your Focus\ndecompose, assign, synthesize" in plan.prompt
    assert "- backend (backend): the backend view" in plan.prompt


def test_a_specialist_the_plan_does_not_assign_is_skipped(acme, fake_llm):
    coordinator_plans(fake_llm, {"backend": "design the API"}, "Only the API matters here.")
    fake_llm.on(purpose="synthesis", replies=Reply("THE SYNTHESIS"))
    session = run(hierarchical(acme, "coord", "backend", "frontend"))
    assert session.status == "completed", session.error
    assert session.error == ""
    frontend = session.contributions.get(agent_key="frontend")
    assert frontend.status == "skipped"
    assert frontend.response == "" and frontend.subtask == ""
    assert not fake_llm.calls_for(agent="frontend")
    assert "## Your Assignment (from the coordinator)\ndesign the API" in (
        fake_llm.calls_for(agent="backend")[0].prompt
    )
    synthesis_prompt = fake_llm.calls_for(purpose="synthesis")[0].prompt
    assert "### backend (" in synthesis_prompt and "### frontend (" not in synthesis_prompt
    skipped = session.events.get(name="tool:collaborative:agent:skipped")
    assert skipped.data == {"agent": "frontend", "reason": "not in the plan"}
    assert session.metadata["plan"]["unassigned"] == ["frontend"]
    assert session.metadata["agents_completed"] == 2
    assert session.consensus["agents_count"] == 1


def test_the_coordinators_contribution_is_its_plan_text(acme, fake_llm):
    coordinator_plans(
        fake_llm,
        {"backend": "the API", "frontend": "the UI"},
        "Split by layer: API first, then the UI.",
    )
    session = run(hierarchical(acme, "coord", "backend", "frontend", synthesis="merge"))
    coordinator = session.contributions.get(agent_key="coord")
    assert coordinator.status == "completed"
    assert coordinator.response == "Split by layer: API first, then the UI."
    assert coordinator.tokens_used > 0


def test_a_plan_without_a_paragraph_contributes_its_assignments(acme, fake_llm):
    coordinator_plans(fake_llm, {"backend": "the API"})
    session = run(hierarchical(acme, "coord", "backend", synthesis="merge"))
    assert session.contributions.get(agent_key="coord").response == "- backend: the API"
