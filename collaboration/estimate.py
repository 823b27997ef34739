"""What a collaboration could cost before it starts: each model call it plans, at its worst case,
summed against every budget that would cover it (the up-front refusal and
`POST /api/collaborations/estimate`).
"""

from __future__ import annotations

import json
from decimal import Decimal

from django.conf import settings

from costs.budgets import Planned, fit
from costs.metering import Meter
from costs.models import UsagePurpose
from organization.models import Organization
from organization.prompt import system_prompt_for

from .models import Contribution, Mode
from .runner.agent import SYNTHESIS_MAX_TOKENS, llm_settings, synthesis_settings
from .runner.finish import coordinator_system_prompt
from .selectors import starter_may_read_prompt_of

# The fixed text of our prompt templates around the task, focus and context.
TEMPLATE_ALLOWANCE = 4_000


def planned_calls(
    spec, org: Organization, *, starter_agent_id: int | None, session_id=None
) -> list[Planned]:
    """The calls of a validated start (spec.StartSpec) by a starter (its agent's id; None
    for a human), each with its worst case's inputs."""

    def meter(agent, purpose):
        return Meter.for_agent(agent, purpose, organization_id=org.pk, session_id=session_id)

    base = len(spec.task.encode()) + len(json.dumps(spec.context, default=str).encode())
    calls, answers, coordinating, plan_tokens = [], 0, None, 0
    # The plan's prompt lists the specialists (name, role, focus), the plan is asked again with
    # the reason, and each specialist is sent its subtask (a part of the plan's answer).
    roster = sum(
        len(a.key.encode()) + len(a.role.encode()) + len(a.focus.encode()) + 10
        for a in spec.agents[1:]
    )
    for i, agent_spec in enumerate(spec.agents):
        contribution = Contribution(agent=agent_spec.agent, config=agent_spec.config)
        provider, model, _, max_tokens = llm_settings(contribution)
        # An ad-hoc specialist's own system prompt (up to 20,000 characters) is sent too.
        system = agent_spec.config.get("system_prompt", "")
        if agent_spec.agent is not None:
            custom = starter_may_read_prompt_of(starter_agent_id, agent_spec.agent)
            system = system_prompt_for(agent_spec.agent, include_custom=custom)
        prompt = base + len(system.encode()) + len(agent_spec.focus.encode()) + TEMPLATE_ALLOWANCE
        if spec.mode == Mode.HIERARCHICAL and i == 0:
            # The coordinating agent plans with the coordinator's model (runner/plan.py).
            coordinating = contribution
            provider, model, _, max_tokens = llm_settings(contribution, coordinator=True)
            plan_tokens = max(max_tokens, SYNTHESIS_MAX_TOKENS)
            plan_prompt = prompt + 2 * roster  # the retry's reason may quote the names
            calls += 2 * [
                Planned(
                    meter(agent_spec.agent, UsagePurpose.PLAN),
                    provider,
                    model,
                    plan_prompt,
                    plan_tokens,
                )
            ]
            continue
        prompt += plan_tokens  # a hierarchical specialist's subtask (0 in the other modes)
        if spec.mode == Mode.SEQUENTIAL:
            prompt += answers
        turns = settings.COLLAB_AGENT_MAX_TURNS if agent_spec.config.get("tools") else 1
        calls += turns * [
            Planned(
                meter(agent_spec.agent, UsagePurpose.COLLABORATION),
                provider,
                model,
                prompt,
                max_tokens,
            )
        ]
        answers += max_tokens
    provider, model, _, max_tokens = synthesis_settings(spec.coordinator_config or {}, coordinating)
    calls.append(
        Planned(
            meter(None, UsagePurpose.SYNTHESIS),
            provider,
            model,
            base
            + answers
            + TEMPLATE_ALLOWANCE
            + len(coordinator_system_prompt(spec.coordinator_config).encode()),
            max_tokens,
        )
    )
    return calls


def estimate(
    spec,
    org: Organization,
    *,
    starter_agent_id: int | None,
    max_cost_usd: Decimal | None = None,
    viewer=None,
) -> dict:
    """`{estimated_cost_usd, estimated_tokens, budgets: [...]}`; each budget with what it has
    left and whether the estimate fits (max_cost_usd counts as the session's own budget), as
    the agent `viewer` may read them (costs.budgets.fit; None: a human, who reads them all)."""
    return fit(
        org.pk,
        planned_calls(spec, org, starter_agent_id=starter_agent_id),
        extra_limit=max_cost_usd,
        viewer=viewer,
    )
