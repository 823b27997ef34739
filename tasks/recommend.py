"""Seed 001's 5-priority delegation framework, served: ranked candidates and a suggested decision.

The tiers, and who counts as available or as the asker's team, are in docs/design.md.
"""

from django.db.models import Count
from django.utils import timezone

from organization.models import Agent, Organization
from organization.selectors import (
    reports_below,
    team_rule_of,
)
from organization.workload import AVAILABLE_STATUSES, status_for

from . import sql
from .holds import budget_holds
from .models import URGENCY_RANK, Decision, Task, TaskStatus, Urgency
from .rules import coordination_note, escalation_target, role_violation
from .selectors import completion_seconds, wait_seconds

TIER_NAMES = {
    1: "same_team_exact",
    2: "same_team_related",
    3: "cross_team_exact",
    4: "queue_for_expert",
    5: "escalate",
}
# Tier 4 also holds busy experts who still have room: delegating to them needs no wait.
BUSY_WITH_ROOM = "busy_with_room"


def related_expertise(*, org: Organization, expertise: str) -> list[str]:
    """Terms sharing a human-defined expertise group with `expertise` (exact, case-sensitive)."""
    related = set()
    for group in sql.expertise_groups(org.pk):
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


def _choose(candidates: list[dict], expertise: str, urgency: str, threshold: float):
    """Seed 001's choice among ranked `candidates`: (decision, primary, reasoning), or None
    when none fits (escalate)."""
    direct = [c for c in candidates if c["tier"] <= 3]
    with_room = [c for c in candidates if c["tier_name"] == BUSY_WITH_ROOM]
    waiting = [c for c in candidates if c["tier_name"] == TIER_NAMES[4]]
    if direct:
        primary = direct[0]
        tier = TIER_NAMES[primary["tier"]].replace("_", " ")
        return (
            Decision.DELEGATE,
            primary,
            f"{primary['name']} is the best match (priority {primary['tier']}: {tier}).",
        )
    if with_room:
        primary = with_room[0]
        return (
            Decision.DELEGATE,
            primary,
            f"No available colleague fits; {primary['name']} is busy "
            f"({primary['current_workload']}/{primary['workload_capacity']}) but still has room.",
        )
    if waiting and waiting[0]["estimated_wait_seconds"] < threshold:
        primary = waiting[0]
        return (
            Decision.QUEUE,
            primary,
            f"No {expertise} expert has room; {primary['name']} should be free in about "
            f"{primary['estimated_wait_seconds']} s, within the {urgency} timeline "
            f"({int(threshold)} s).",
        )
    return None


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
    # Only an agent holding the expertise or a related term can be a candidate (the loop below
    # skips everyone else): read those and the asker, not the whole organization.
    terms = [expertise, *sorted(related)]
    if agent is not None:
        everyone = sql.candidates(org.pk, terms, asker_id=agent.pk)
    else:
        everyone = sql.candidates(org.pk, terms)
    me = next((a for a in everyone if agent is not None and a.pk == agent.pk), None)
    my_team = me.team_id if me is not None else None
    others = [
        other
        for other in everyone
        if not (me is not None and other.pk == me.pk)
        and other.handle not in exclude
        and not other.is_paused
        and not (me is not None and role_violation(rule=rule, source=me, target=other))
    ]
    # The asker's reports count as its team; read only when someone is on another team.
    mine = (
        reports_below(me)
        if me is not None and any(my_team is None or o.team_id != my_team for o in others)
        else set()
    )
    held = budget_holds(others)
    candidates = []
    for other in others:
        exact = expertise in other.expertise
        overlap = sorted(related.intersection(other.expertise))
        has_room = other.current_workload < other.workload_capacity
        report = other.pk in mine and (my_team is None or other.team_id != my_team)
        same_team = report or (my_team is not None and other.team_id == my_team)
        team_words = "reports to you" if report else "same team"
        status = status_for(
            is_paused=False, workload=other.current_workload, capacity=other.workload_capacity
        )
        # Priorities 1-3 need an available colleague (idle or active), as the roster says.
        available = status in AVAILABLE_STATUSES
        tier_name = None
        if exact and available and same_team:
            tier, why = 1, f"{expertise} expertise, {team_words}, no coordination overhead"
        elif overlap and available and same_team and not exact:
            tier, why = (
                2,
                f"related expertise ({', '.join(overlap)}), {team_words}, can learn with guidance",
            )
        elif exact and available:
            tier, why = 3, f"{expertise} expertise, other team: note the coordination overhead"
        elif has_room and (exact or (overlap and same_team)):
            tier, tier_name = 4, BUSY_WITH_ROOM
            what = (
                f"{expertise} expertise" if exact else f"related expertise ({', '.join(overlap)})"
            )
            why = f"{what}, busy but has room: offered after every available colleague"
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
                "tier_name": tier_name or TIER_NAMES[tier],
                "reason": f"{_describe(other, status)}: {why}",
                "status": status,
                "current_workload": other.current_workload,
                "workload_capacity": other.workload_capacity,
                "availability_until": other.availability_until,
                "estimated_wait_seconds": None,
                "held_for_budget": held.get(other.pk),
                "_agent": other,
                "_order": (not exact, not same_team),
            }
        )

    queued = [c for c in candidates if c["tier_name"] == TIER_NAMES[4]]
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
        now = timezone.now()
        for c in queued:
            pk = c["_agent"].pk
            c["estimated_wait_seconds"] = wait_seconds(
                position=ahead.get(pk, 0) + 1,
                mean_seconds=means[pk],
                capacity=c["workload_capacity"],
                free_at=c["availability_until"],
                now=now,
            )
            c["reason"] += f", estimated wait {c['estimated_wait_seconds']} s"
            if c["availability_until"] and c["availability_until"] > now:
                c["reason"] += (
                    f" (free at {c['availability_until'].isoformat()}, by their own estimate)"
                )
    for c in candidates:
        if c["held_for_budget"]:
            c["reason"] += f"; held for budget ({c['held_for_budget']}): work given to them waits"
    # Whom a budget holds back comes after everyone else. Within tier 4, who has room comes
    # before whom to queue for; then exact before related expertise and same team before other
    # teams.
    candidates.sort(
        key=lambda c: (
            c["held_for_budget"] is not None,
            c["tier"],
            c["tier_name"] != BUSY_WITH_ROOM,
            c["estimated_wait_seconds"] or 0,
            c["_order"],
            c["current_workload"],
            c["id"],
        )
    )

    # Where the escalate move would send a task the caller creates (the same candidates).
    escalate_to = escalation_target(rule=rule, source=me, by_roles=me is not None)
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
        "availability_until": None,
        "estimated_wait_seconds": None,
        "held_for_budget": None,
    }

    threshold = getattr(rule, f"stale_after_{urgency}").total_seconds()
    free = [c for c in candidates if c["held_for_budget"] is None]
    held_back = [c for c in candidates if c["held_for_budget"] is not None]
    # Whom a budget holds back is chosen only when nobody else fits, and the decision says so.
    chosen_move = _choose(free, expertise, urgency, threshold) or _choose(
        held_back, expertise, urgency, threshold
    )
    if chosen_move is not None:
        decision, primary, reasoning = chosen_move
    else:
        decision, primary = Decision.ESCALATE, escalation
        waiting = [c for c in candidates if c["tier_name"] == TIER_NAMES[4]]
        reasoning = (
            f"No available colleague has {expertise} expertise"
            + (" and the experts' wait exceeds the urgency timeline" if waiting else "")
            + f": {escalation['reason']}."
        )
    if primary.get("held_for_budget"):
        reasoning += (
            f" {primary['name']} is held for budget ({primary['held_for_budget']}): the work "
            "waits until the budget has room."
        )
    elif held_back:
        passed = held_back[0]
        reasoning += (
            f" {passed['name']} is held for budget ({passed['held_for_budget']}): passed over."
        )
    rest = [c for c in candidates if c is not primary]
    fallback = rest[0] if rest and decision != Decision.ESCALATE else None
    ranked = [*candidates, escalation]
    chosen = primary.get("_agent")
    # `is_cross_team`, with the asker's reports read above.
    cross_team = (
        decision != Decision.ESCALATE
        and me is not None
        and chosen is not None
        and (my_team is None or chosen.team_id != my_team)
        and chosen.pk not in mine
    )
    for c in ranked:
        c.pop("_agent", None)
        c.pop("_order", None)
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
    if cross_team:
        text.append(f"Notes: {coordination_note(me, chosen)}")
    return {
        "expertise": expertise,
        "urgency": urgency,
        "related_expertise": sorted(related),
        "decision": decision.value,
        "primary_choice": primary,
        "fallback": fallback,
        "escalate_to": escalation,
        "reasoning": reasoning,
        "cross_team": cross_team,
        "candidates": ranked,
        "decision_text": "\n".join(text),
    }
