import pytest

from organization.prompt import system_prompt_for
from tests.conftest import agent_of

pytestmark = pytest.mark.django_db


def test_the_context_names_identity_manager_workload_and_expertise(demo):
    sarah = agent_of(demo, "agent-sarah")
    prompt = system_prompt_for(sarah)
    assert "## YOUR ORGANIZATIONAL CONTEXT" in prompt
    assert "You are: Sarah" in prompt
    assert "Role: Frontend Developer" in prompt
    assert "Team: Development" in prompt
    assert "Your Manager: Alice (ID: agent-alice)" in prompt
    assert "Current Workload: 3/5 tasks" in prompt
    assert "Your Expertise: React, TypeScript, CSS" in prompt
    assert "## DELEGATION FRAMEWORK" in prompt
    assert "DELEGATION DECISION:" in prompt


def test_the_custom_prompt_comes_first_and_text_is_not_html_escaped(demo):
    sarah = agent_of(demo, "agent-sarah")
    sarah.system_prompt = "You write <React> & TypeScript."
    sarah.save()
    prompt = system_prompt_for(sarah)
    assert prompt.startswith("You write <React> & TypeScript.\n\n## YOUR ORGANIZATIONAL CONTEXT")


def test_the_framework_has_the_five_priorities_the_decision_format_and_the_error_lines(demo):
    prompt = system_prompt_for(agent_of(demo, "agent-sarah"))
    priorities = [
        "1. Best same-team match",
        "2. Partial expertise on your team",
        "3. Best cross-team match",
        "4. Queue for the primary expert",
        "5. Escalate",
    ]
    positions = [prompt.index(p) for p in priorities]
    assert positions == sorted(positions)
    decision = prompt[prompt.index("DELEGATION DECISION:") :]
    for line in [
        "Primary Choice: {name} ({reason})",
        "Fallback: {backup} ({reason}) [if applicable]",
        "Decision: DELEGATE | QUEUE | ESCALATE",
        "Reasoning: {1-2 sentence explanation}",
        "Wait Time: {if queuing}",
        "Notes: {special context}",
    ]:
        assert f"\n{line}\n" in decision, line
    for line in [
        "This colleague doesn't exist in my roster. Escalating to manager.",
        "Target colleague is offline. Queuing task or escalating depending on urgency.",
        "No colleague has required expertise. Escalating to manager for guidance.",
        "This task was delegated to me by {original_agent}. I should not delegate back. Escalating.",
    ]:
        assert line in prompt, line
    assert "call `get_organization_roster`" in prompt


def test_an_agent_without_manager_or_team_gets_a_plain_answer_not_an_empty_field(demo):
    alice = agent_of(demo, "agent-alice")
    prompt = system_prompt_for(alice)
    assert "Your Manager: none" in prompt
    assert "Current Workload: 4/5 tasks" in prompt
    alice.team = None
    alice.workload_capacity = 8
    alice.save()
    prompt = system_prompt_for(alice)
    assert "Team: (no team)" in prompt
    assert "Current Workload: 4/8 tasks" in prompt
