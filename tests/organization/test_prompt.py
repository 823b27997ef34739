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
