"""Seed 001's system prompt: the agent's custom prompt + its organizational context, fresh each call."""

from django.template.loader import render_to_string

from . import sql
from .models import Agent


def organizational_context(agent: Agent) -> str:
    """The rendered "YOUR ORGANIZATIONAL CONTEXT" + "DELEGATION FRAMEWORK" sections.

    Plain text for an LLM, not HTML: the template turns autoescaping off.
    """
    found = sql.fresh_agent(organization_id=agent.organization_id, agent_id=agent.pk)
    if not found:
        raise Agent.DoesNotExist(f"Agent {agent.pk} is gone.")
    fresh = found[0]
    return render_to_string(
        "organization/organizational_context.md",
        {
            "agent": fresh,
            "organization": fresh.organization,
            "team_name": fresh.team.name if fresh.team_id else "",
            "senior": fresh.senior,
            "workload": fresh.current_workload,
            "expertise": ", ".join(fresh.expertise),
        },
    ).strip()


def system_prompt_for(agent: Agent, *, include_custom: bool = True) -> str:
    """The full system prompt: custom prompt first, then the organizational context.

    `include_custom=False` leaves out the custom prompt, which is private to the agent and the
    humans of its organization (seed 000: colleagues never see each other's system prompts).
    """
    context = organizational_context(agent)
    custom = agent.system_prompt.strip() if include_custom else ""
    return f"{custom}\n\n{context}\n" if custom else f"{context}\n"
