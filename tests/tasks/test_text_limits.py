"""Every free-text field has a length limit (issue 8 §4), so no list answer can grow without
bound: one character over answers 400 `invalid` (the tool door: `invalid_params`), exactly
the limit is accepted."""

import pytest
from django.core.exceptions import ValidationError

from infrastructure.errors import Invalid
from organization.caller import Caller
from organization.models import (
    EXPERTISE_ITEM_MAX_LENGTH,
    EXPERTISE_MAX_ITEMS,
    ExpertiseGroup,
    validate_expertise,
)
from organization.registry import call_tool
from tasks.models import DESCRIPTION_MAX_LENGTH, NOTE_MAX_LENGTH
from tests.tasks.conftest import assert_error, create, post

NOTE_OVER = "x" * (NOTE_MAX_LENGTH + 1)


def test_a_task_description_over_the_limit_is_400_invalid(cast):
    over = create(cast.human, description="x" * (DESCRIPTION_MAX_LENGTH + 1))
    assert_error(over, 400, "invalid", "description")
    assert create(cast.human, description="x" * DESCRIPTION_MAX_LENGTH).status_code == 201


@pytest.mark.parametrize("field", ["primary_reason", "fallback", "reasoning", "notes"])
def test_a_delegation_decision_field_over_the_limit_is_400_invalid(cast, field):
    task = create(cast.human, agent_id="agent-sarah").json()
    client = cast.client(cast.sarah)
    response = post(
        client, f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex", field: NOTE_OVER}
    )
    assert_error(response, 400, "invalid", field)
    body = {"agent_id": "agent-alex", field: "x" * NOTE_MAX_LENGTH}
    assert post(client, f"/api/tasks/{task['id']}/delegate", body).status_code == 200


@pytest.mark.parametrize(
    "action, body",
    [
        ("queue", {"agent_id": "agent-boss", "reasoning": NOTE_OVER}),
        ("escalate", {"reason": NOTE_OVER}),
        ("status", {"status": "in_progress", "note": NOTE_OVER}),
        ("cancel", {"reason": NOTE_OVER}),
    ],
)
def test_reasons_and_notes_over_the_limit_are_400_invalid(cast, action, body):
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/{action}", body)
    assert_error(response, 400, "invalid")


@pytest.mark.parametrize(
    "tool, params",
    [
        ("create_task", {"title": "A task", "description": "x" * (DESCRIPTION_MAX_LENGTH + 1)}),
        ("delegate_task", {"task_id": 1, "agent_id": "agent-alex", "notes": NOTE_OVER}),
        ("escalate_task", {"task_id": 1, "reason": NOTE_OVER}),
        ("update_task_status", {"task_id": 1, "status": "blocked", "note": NOTE_OVER}),
    ],
)
def test_the_tool_door_has_the_same_limits(cast, tool, params):
    with pytest.raises(Invalid) as refused:
        call_tool(Caller(organization=cast.org, agent=cast.sarah), tool, params)
    assert refused.value.status == 400
    assert not cast.org.tasks.exists()


def test_expertise_has_a_bounded_number_of_bounded_terms(cast):
    validate_expertise(["x" * EXPERTISE_ITEM_MAX_LENGTH] * EXPERTISE_MAX_ITEMS)
    with pytest.raises(ValidationError):
        validate_expertise(["x" * (EXPERTISE_ITEM_MAX_LENGTH + 1)])
    with pytest.raises(ValidationError):
        validate_expertise(["React"] * (EXPERTISE_MAX_ITEMS + 1))
    cast.sarah.expertise = ["React"] * (EXPERTISE_MAX_ITEMS + 1)
    with pytest.raises(ValidationError):
        cast.sarah.full_clean()
    group = ExpertiseGroup(organization=cast.org, name="Web", expertise=["x" * 101])
    with pytest.raises(ValidationError):
        group.full_clean()
