"""Seed 001's 5-priority delegation framework, served: ranked candidates and a suggested decision.

1 same team, exact expertise, has room · 2 same team, related expertise (the organization's
expertise groups), has room · 3 other team, exact expertise, has room · 4 queue for a busy (full,
not offline) exact expert, with an estimated wait · 5 escalate (senior, default supervisor, humans).
Offline agents are never candidates; with hierarchy enforcement on, neither is anyone the caller
may not assign to.
"""

from django.db.models import Count

from organization.models import Agent, ExpertiseGroup, Organization, status_for
from organization.selectors import agents_with_workload, team_rule_of

from .models import URGENCY_RANK, Decision, Task, TaskStatus, Urgency
from .rules import role_violation
from .selectors import completion_seconds, wait_seconds
from .services import escalation_target

TIER_NAMES = {
    1: "same_team_exact",
    2: "same_team_related",
    3: "cross_team_exact",
    4: "queue_for_expert",
    5: "escalate",
}


def related_expertise(*, org: Organization, expertise: str) -> list[str]:
    """Terms sharing a human-defined expertise group with `expertise` (exact, case-sensitive)."""
    related = set()
    for group in ExpertiseGroup.objects.filter(organization=org):
        if expertise in group.expertise:
            related.update(group.expertise)
    related.discard(expertise)
    return sorted(related)


def _describe(agent: Agent, status: str) -> str:
    team = agent.team.name if agent.team_id else "no team"
    return (
        f"{agent.name} ({agent.role or 'agent'}, {team}, {status}, "
        f"{agent.current_workload}/{agent.workload_capacity} tasks)"
    )


def recommend(
    *,
    org: Organization,
    agent: Agent | None,
    expertise: str,
    urgency: str = Urgency.NORMAL,
    exclude: tuple[str, ...] = (),
) -> dict:
    """The ranked candidates for `agent` (None: a human asking) and the suggested decision."""
    rule = team_rule_of(org=org)
    related = set(related_expertise(org=org, expertise=expertise))
    everyone = list(agents_with_workload(org=org))
    me = next((a for a in everyone if agent is not None and a.pk == agent.pk), None)
    my_team = me.team_id if me is not None else None
    candidates = []
    for other in everyone:
        if (me is not None and other.pk == me.pk) or other.handle in exclude or other.is_paused:
            continue
        if me is not None and role_violation(rule=rule, source=me, target=other):
            continue
        exact = expertise in other.expertise
        overlap = sorted(related.intersection(other.expertise))
        has_room = other.current_workload < other.workload_capacity
        same_team = my_team is not None and other.team_id == my_team
        status = status_for(is_paused=False, workload=other.current_workload)
        if exact and has_room and same_team:
            tier, why = 1, f"{expertise} expertise, same team, no coordination overhead"
        elif overlap and has_room and same_team and not exact:
            tier, why = (
                2,
                f"related expertise ({', '.join(overlap)}), same team, can learn with guidance",
            )
        elif exact and has_room:
            tier, why = 3, f"{expertise} expertise, other team: note the coordination overhead"
        elif exact:
            tier, why = 4, f"{expertise} expert at capacity: queue for them"
        else:
            continue
        candidates.append(
            {
                "id": other.handle,
                "name": other.name,
                "role": other.role,
                "team": other.team.name if other.team_id else None,
                "tier": tier,
                "tier_name": TIER_NAMES[tier],
                "reason": f"{_describe(other, status)}: {why}",
                "status": status,
                "current_workload": other.current_workload,
                "workload_capacity": other.workload_capacity,
                "estimated_wait_seconds": None,
                "_agent": other,
            }
        )

    queued = [c for c in candidates if c["tier"] == 4]
    if queued:
        ids = [c["_agent"].pk for c in queued]
        rank = URGENCY_RANK[urgency]
        ahead = dict(
            Task.objects.filter(
                queued_for_id__in=ids, status=TaskStatus.QUEUED, urgency_rank__gte=rank
            )
            .values("queued_for_id")
            .annotate(n=Count("pk"))
            .values_list("queued_for_id", "n")
            .order_by()
        )
        means = completion_seconds(ids)
        for c in queued:
            pk = c["_agent"].pk
            c["estimated_wait_seconds"] = wait_seconds(
                position=ahead.get(pk, 0) + 1,
                mean_seconds=means[pk],
                capacity=c["workload_capacity"],
            )
            c["reason"] += f", estimated wait {c['estimated_wait_seconds']} s"
    candidates.sort(
        key=lambda c: (c["tier"], c["estimated_wait_seconds"] or 0, c["current_workload"], c["id"])
    )

    escalate_to = escalation_target(rule=rule, source=me)
    escalation = {
        "id": escalate_to.handle if escalate_to else None,
        "name": escalate_to.name if escalate_to else "humans",
        "role": escalate_to.role if escalate_to else "",
        "team": escalate_to.team.name if escalate_to and escalate_to.team_id else None,
        "tier": 5,
        "tier_name": TIER_NAMES[5],
        "reason": (
            f"escalate to {escalate_to.name} ({escalate_to.handle})"
            + (" , your senior" if me is not None and me.senior_id == escalate_to.pk else "")
            if escalate_to
            else "escalate to humans: no senior or default supervisor available"
        ).replace(" , ", ", "),
        "status": None,
        "current_workload": None,
        "workload_capacity": None,
        "estimated_wait_seconds": None,
    }

    threshold = getattr(rule, f"stale_after_{urgency}").total_seconds()
    direct = [c for c in candidates if c["tier"] <= 3]
    waiting = [c for c in candidates if c["tier"] == 4]
    if direct:
        decision, primary = Decision.DELEGATE, direct[0]
        reasoning = f"{primary['name']} is the best match (priority {primary['tier']}: {TIER_NAMES[primary['tier']].replace('_', ' ')})."
    elif waiting and waiting[0]["estimated_wait_seconds"] < threshold:
        decision, primary = Decision.QUEUE, waiting[0]
        reasoning = (
            f"No {expertise} expert has room; {primary['name']} should be free in about "
            f"{primary['estimated_wait_seconds']} s, within the {urgency} timeline ({int(threshold)} s)."
        )
    else:
        decision, primary = Decision.ESCALATE, escalation
        reasoning = (
            f"No available colleague has {expertise} expertise"
            + (" and the experts' wait exceeds the urgency timeline" if waiting else "")
            + f": {escalation['reason']}."
        )
    rest = [c for c in candidates if c is not primary]
    fallback = rest[0] if rest and decision != Decision.ESCALATE else None
    ranked = [*candidates, escalation]
    for c in ranked:
        c.pop("_agent", None)
    text = [
        "DELEGATION DECISION:",
        f"Primary Choice: {primary['name']} ({primary['reason']})",
    ]
    if fallback:
        text.append(f"Fallback: {fallback['name']} ({fallback['reason']})")
    target = f" to {primary['name']}" if decision != Decision.QUEUE else f" for {primary['name']}"
    text.append(f"Decision: {decision}{target}")
    text.append(f"Reasoning: {reasoning}")
    if decision == Decision.QUEUE:
        text.append(f"Wait Time: {primary['estimated_wait_seconds']} s")
    return {
        "expertise": expertise,
        "urgency": urgency,
        "related_expertise": sorted(related),
        "decision": decision.value,
        "primary_choice": primary,
        "fallback": fallback,
        "escalate_to": escalation,
        "reasoning": reasoning,
        "candidates": ranked,
        "decision_text": "\n".join(text),
    }
