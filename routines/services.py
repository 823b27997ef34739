"""Every write of routines: create, change, delete, rotate the secret, and the occurrences —
a beat's tick, a run on demand, a signed trigger, and the sweep of missed and held ones."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from infrastructure.errors import Conflict, DomainError, Invalid, NotFound
from organization.models import Agent, Organization, Team
from organization.selectors import agent_by_handle
from organization.workload import agents_with_workload
from tasks import services as task_services
from tasks.models import (
    DESCRIPTION_MAX_LENGTH,
    FINISHED_STATUSES,
    ActorKind,
    Decision,
    Task,
    Urgency,
)
from tasks.recommend import recommend
from tasks.rules import Actor

from . import schedule, signing
from .models import (
    MIN_INTERVAL_SECONDS,
    ROUTINE_FIELDS,
    CatchUp,
    Concurrency,
    Occurrence,
    Outcome,
    Routine,
    Source,
)
from .selectors import routine_by_id

# At most this many occurrences a `queue` routine holds; past it they are skipped.
MAX_HELD = 10
# Routines one sweep looks at, at most (the rest at the next sweep).
SWEEP_BATCH = 500
FIELDS = ROUTINE_FIELDS


# --- the routine itself ---------------------------------------------------------------------


def _owner(organization: Organization, team: str | None, agent: str | None) -> dict:
    """The owner by its name (a team) or id (an agent): exactly one, of this organization."""
    if bool(team) == bool(agent):
        raise Invalid("Give the owner: either team (its name) or agent (its id).", "invalid")
    if team:
        found = Team.objects.filter(organization=organization, name=team).first()
        if found is None:
            raise NotFound(f"Team not found: {team}", "team_not_found")
        return {"team": found, "agent": None}
    return {"team": None, "agent": agent_by_handle(org=organization, handle=agent)}


def check_routine(routine: Routine) -> None:
    """Its schedule, choices and owner's needs (400 `invalid`): the API's and the admin's check."""
    schedule.check(
        cron=routine.cron, timezone=routine.timezone, interval_seconds=routine.interval_seconds
    )
    if routine.urgency not in Urgency.values:
        raise Invalid(f"urgency: one of {', '.join(Urgency.values)}.", "invalid")
    if routine.concurrency not in Concurrency.values:
        raise Invalid(f"concurrency: one of {', '.join(Concurrency.values)}.", "invalid")
    if routine.catch_up not in CatchUp.values:
        raise Invalid(f"catch_up: one of {', '.join(CatchUp.values)}.", "invalid")
    if routine.team_id and not routine.required_expertise:
        # The recommendation routes by expertise: without one it has nobody to choose from.
        raise Invalid("required_expertise: needed for a routine a team owns.", "invalid")


def _scheduled(routine: Routine, now: datetime) -> None:
    """Save the routine's next time and its PeriodicTask after a change of schedule or state."""
    routine.next_run_at = schedule.next_after(routine, now) if routine.enabled else None
    routine.save()
    schedule.sync_periodic_task(routine, now, restart=True)


@transaction.atomic
def routine_create(
    *,
    organization: Organization,
    title: str,
    team: str | None = None,
    agent: str | None = None,
    **fields,
) -> tuple[Routine, str]:
    """A new routine and its PeriodicTask; returns it with its webhook secret (shown once)."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise Invalid(f"Unknown routine fields: {', '.join(sorted(unknown))}.", "invalid")
    routine = Routine(
        organization=organization,
        title=title,
        webhook_nonce=signing.new_nonce(),
        **_owner(organization, team, agent),
        **fields,
    )
    check_routine(routine)
    _scheduled(routine, timezone.now())
    return routine, signing.secret_of(routine.webhook_nonce)


@transaction.atomic
def routine_update(*, routine: Routine, **changes) -> Routine:
    """Change some fields; a new schedule (or enabling it again) starts from now."""
    unknown = set(changes) - set(FIELDS)
    if unknown:
        raise Invalid(f"Unknown routine fields: {', '.join(sorted(unknown))}.", "invalid")
    routine = Routine.objects.select_for_update().get(pk=routine.pk)
    if "team" in changes or "agent" in changes:
        team = changes.pop("team", None)
        agent = changes.pop("agent", None)
        for name, value in _owner(routine.organization, team, agent).items():
            setattr(routine, name, value)
    if "cron" in changes and changes["cron"]:
        changes.setdefault("interval_seconds", None)
    if changes.get("interval_seconds") is not None:
        changes.setdefault("cron", "")
    rescheduled = any(
        name in changes and changes[name] != getattr(routine, name)
        for name in ("cron", "timezone", "interval_seconds", "enabled")
    )
    for name, value in changes.items():
        setattr(routine, name, value)
    check_routine(routine)
    if rescheduled:
        _scheduled(routine, timezone.now())
    else:
        routine.save()
        schedule.sync_periodic_task(routine, timezone.now(), restart=False)
    return routine


@transaction.atomic
def routine_delete(*, routine: Routine) -> None:
    """The routine, its history and its PeriodicTask (the tasks it created stay)."""
    schedule.delete_periodic_task(routine)
    routine.delete()


@transaction.atomic
def routine_rotate_secret(*, routine: Routine) -> str:
    """A new webhook secret: the old one stops working at once."""
    routine.webhook_nonce = signing.new_nonce()
    routine.save(update_fields=["webhook_nonce", "updated_at"])
    return signing.secret_of(routine.webhook_nonce)


def webhook_secret(routine: Routine) -> str:
    return signing.secret_of(routine.webhook_nonce)


class InvalidSignature(DomainError):
    def __init__(self):
        super().__init__(
            "A fresh X-Agent-Org-Timestamp and its X-Agent-Org-Signature, not used before, are "
            "needed.",
            "invalid_signature",
            401,
        )


def routine_signed(pk, *, timestamp: str | None, sent: str | None, body: bytes) -> Routine:
    """The routine a signed call names when its signature is fresh, right and not used before;
    else InvalidSignature — an unknown routine too, so the path is no oracle of ids."""
    routine = routine_by_id(pk)
    if (
        routine is None
        or not signing.is_valid(
            nonce=routine.webhook_nonce, timestamp=timestamp, sent=sent, body=body
        )
        or not signing.first_use(routine_id=routine.pk, sent=sent)
    ):
        raise InvalidSignature()
    return routine


# --- an occurrence ---------------------------------------------------------------------------


def actor_of(routine: Routine) -> Actor:
    """Who creates a routine's tasks: the system, named after the routine."""
    return Actor(ActorKind.SYSTEM, f"routine:{routine.pk}")


def _render(text: str, routine: Routine, at: datetime) -> str:
    """The templates: `{date}` is the occurrence's date in the routine's timezone."""
    day = at.astimezone(schedule.zone(routine.timezone)).date().isoformat()
    return text.replace("{date}", day)


def _route(routine: Routine, at: datetime) -> Task:
    """Create the occurrence's task as any task is created: given to the routine's agent (queued
    for it when it is full), or to whom the recommendation chooses in the owning team."""
    org, actor = routine.organization, actor_of(routine)
    fields = {
        "title": _render(routine.title, routine, at)[:300],
        "description": _render(routine.description, routine, at)[:DESCRIPTION_MAX_LENGTH],
        "required_expertise": routine.required_expertise,
        "urgency": routine.urgency,
    }
    if routine.agent_id is not None:
        agent = agents_with_workload(org=org).get(pk=routine.agent_id)
        if agent.is_paused or agent.current_workload < agent.workload_capacity:
            return task_services.task_create(org=org, actor=actor, assignee=agent, **fields)
        task = task_services.task_create(org=org, actor=actor, **fields)
        return task_services.task_queue(
            task=task, actor=actor, to=agent, reasoning=f"{agent.handle} owns the routine."
        )
    outsiders = Agent.objects.filter(organization=org).exclude(team_id=routine.team_id)
    advice = recommend(
        org=org,
        agent=None,
        expertise=routine.required_expertise,
        urgency=routine.urgency,
        exclude=tuple(outsiders.values_list("handle", flat=True)),
    )
    decision, primary = advice["decision"], advice["primary_choice"]
    if decision == Decision.DELEGATE:
        chosen = agent_by_handle(org=org, handle=primary["id"])
        return task_services.task_create(org=org, actor=actor, assignee=chosen, **fields)
    task = task_services.task_create(org=org, actor=actor, **fields)
    if decision == Decision.QUEUE:
        return task_services.task_queue(
            task=task, actor=actor, to=primary["id"], reasoning=advice["reasoning"][:2000]
        )
    return task_services.task_escalate(task=task, actor=actor, reason=advice["reasoning"])


def _record(routine, at, source, outcome, task=None, reason="") -> Occurrence:
    occurrence = Occurrence.objects.create(
        routine=routine, at=at, source=source, outcome=outcome, task=task, reason=reason[:500]
    )
    _forget_oldest(routine)
    return occurrence


def _forget_oldest(routine: Routine) -> None:
    """The history keeps the newest ROUTINES_OCCURRENCES_KEPT occurrences, every held one and the
    one whose task the concurrency waits on: a routine every few seconds would otherwise write
    thousands of rows a day."""
    kept = settings.ROUTINES_OCCURRENCES_KEPT
    newest = routine.occurrences.order_by("-pk").values_list("pk", flat=True)
    oldest_kept = next(iter(newest[kept - 1 : kept]), None)
    if oldest_kept is None:
        return
    waited_on = (
        routine.occurrences.filter(outcome=Outcome.CREATED, task__isnull=False)
        .order_by("-task_id")
        .values_list("pk", flat=True)[:1]
    )
    routine.occurrences.filter(pk__lt=oldest_kept).exclude(outcome=Outcome.HELD).exclude(
        pk__in=list(waited_on)
    ).delete()


def _refusal(exc: DomainError) -> str:
    """Why no task was created: the rule's code and sentence, or the decision that waits."""
    decision = getattr(exc, "decision", None)
    if decision is not None:
        return f"{exc.code}: decision {decision.pk} waits for a human's approval"
    return f"{exc.code}: {exc.message}"


def _create(routine: Routine, at: datetime, source: str, reason: str = "") -> Occurrence:
    """The occurrence's task, or a skipped occurrence saying which rule refused it."""
    try:
        task = _route(routine, at)
    except DomainError as exc:
        return _record(routine, at, source, Outcome.SKIPPED, reason=_refusal(exc))
    return _record(routine, at, source, Outcome.CREATED, task=task, reason=reason)


def open_task(routine: Routine) -> Task | None:
    """The last created occurrence's task while it is not finished: the newest task, whatever
    its occurrence's date (a held one keeps the time it came due; a tick may be dated before a
    run it was taken after)."""
    last = (
        routine.occurrences.filter(outcome=Outcome.CREATED, task__isnull=False)
        .select_related("task")
        .order_by("-task_id")
        .first()
    )
    if last is None or last.task.status in FINISHED_STATUSES:
        return None
    return last.task


def _occur(routine: Routine, at: datetime, source: str, reason: str = "") -> Occurrence:
    """One occurrence under the routine's concurrency; the routine's row is locked."""
    busy = open_task(routine)
    held = routine.occurrences.filter(outcome=Outcome.HELD).count()
    if routine.concurrency == Concurrency.SKIP and busy is not None:
        if source != Source.SCHEDULE:
            raise Conflict(
                f"The routine's last occurrence (task {busy.pk}) is still open.", "routine_busy"
            )
        why = f"routine_busy: the last occurrence's task {busy.pk} is still open"
        return _record(routine, at, source, Outcome.SKIPPED, reason=why)
    if routine.concurrency == Concurrency.QUEUE and (busy is not None or held):
        if held >= MAX_HELD:
            why = f"queue_full: {MAX_HELD} occurrences wait already"
            return _record(routine, at, source, Outcome.SKIPPED, reason=why)
        why = reason or "held until the open occurrence's task finishes"
        return _record(routine, at, source, Outcome.HELD, reason=why)
    return _create(routine, at, source, reason)


def _locked(routine_id: int) -> Routine | None:
    return (
        Routine.objects.select_for_update(of=("self",))
        .select_related("organization", "periodic_task")
        .filter(pk=routine_id)
        .first()
    )


@transaction.atomic
def routine_run(*, routine: Routine, source: str = Source.RUN) -> Occurrence:
    """Fire now, on demand (`run`) or from the signed webhook (`trigger`): 409 `routine_busy`
    for a `skip` routine whose last occurrence is open; 409 `routine_disabled` for a disabled
    routine's trigger (a human's run still fires it)."""
    routine = _locked(routine.pk)
    if source == Source.TRIGGER and not routine.enabled:
        raise Conflict("The routine is disabled: its webhook creates nothing.", "routine_disabled")
    _release_held(routine)
    return _occur(routine, timezone.now(), source)


# --- the schedule: ticks, missed times, held occurrences -------------------------------------


def _missed(routine: Routine, count: int, at: datetime, on_time: bool) -> Occurrence:
    """`count` scheduled times passed unfired: `catch_up` says what they become."""
    words = f"{count}{'+' if count > schedule.MAX_COUNTED else ''} missed occurrence(s)"
    if routine.catch_up == CatchUp.RUN_ONCE and not on_time:
        return _occur(routine, at, Source.SCHEDULE, reason=f"catch_up run_once: {words}")
    reason = f"missed: {words} while the beat or the worker was away (catch_up {routine.catch_up})"
    if routine.catch_up == CatchUp.RUN_ONCE:
        reason = f"missed: {words}, caught up by the occurrence on time"
    return _record(routine, at, Source.SCHEDULE, Outcome.SKIPPED, reason=reason)


@transaction.atomic
def routine_tick(*, routine_id: int, expires: datetime | None = None) -> Occurrence | None:
    """The beat's tick, dated when the beat sent it (its message's expiry less the PeriodicTask's
    `expire_seconds`): an occurrence if a scheduled time came, the missed times before it handled
    by `catch_up`; nothing for a tick before its time."""
    routine = _locked(routine_id)
    if routine is None:
        # Deleted with its owner (a cascade does not reach the beat): its entry goes too.
        schedule.delete_orphan_periodic_task(routine_id)
        return None
    if not routine.enabled or routine.next_run_at is None:
        return None
    sent_at = timezone.now()
    if expires is not None and routine.periodic_task_id is not None:
        lifetime = routine.periodic_task.expire_seconds or 0
        sent_at = min(sent_at, expires - timedelta(seconds=lifetime))
    if routine.occurrences.filter(source=Source.SCHEDULE, at=sent_at).exists():
        # The same tick again (re-delivered, or taken by two workers): it was handled.
        return None
    _release_held(routine)
    verdict = schedule.tick_verdict(routine, sent_at)
    if verdict is None:
        return None  # early: a scheduled time it stands for was handled already
    missed, on_time = verdict
    occurrence = None
    if missed:
        occurrence = _missed(routine, missed, sent_at, on_time)
    if on_time:
        occurrence = _occur(routine, sent_at, Source.SCHEDULE)
    routine.next_run_at = schedule.next_after(routine, sent_at)
    routine.save(update_fields=["next_run_at"])
    return occurrence


def routine_catch_up(*, routine_id: int, now: datetime) -> None:
    """The sweep's look at one enabled routine: release a held occurrence whose turn came, and
    handle the scheduled times whose grace passed with no tick (a worker was away: they expired)."""
    with transaction.atomic():
        routine = _locked(routine_id)
        if routine is None or not routine.enabled or routine.next_run_at is None:
            return
        _release_held(routine)
        grace = schedule.grace(routine, now)
        missed, following = schedule.slots_through(routine, routine.next_run_at, now - grace)
        if not missed:
            return
        _missed(routine, missed, now, on_time=False)
        # The times still within their grace keep their ticks (the beat's phase is kept).
        routine.next_run_at = following
        routine.save(update_fields=["next_run_at"])


def routines_sweep(*, now: datetime | None = None) -> None:
    """Every routine that is late or holds occurrences (the beat's `routines.sweep`)."""
    now = now or timezone.now()
    least = min(settings.ROUTINES_MISFIRE_GRACE, timedelta(seconds=MIN_INTERVAL_SECONDS))
    late = Routine.objects.filter(enabled=True, next_run_at__lt=now - least)
    holding = Occurrence.objects.filter(outcome=Outcome.HELD, routine__enabled=True)
    pks = set(late.values_list("pk", flat=True)[:SWEEP_BATCH])
    pks |= set(holding.order_by().distinct().values_list("routine_id", flat=True)[:SWEEP_BATCH])
    for pk in sorted(pks):
        routine_catch_up(routine_id=pk, now=now)


def _release_held(routine: Routine) -> None:
    """The oldest held occurrence gets its task once the open one finished (one at a time)."""
    held = routine.occurrences.filter(outcome=Outcome.HELD).order_by("at", "pk").first()
    if held is None or open_task(routine) is not None:
        return
    try:
        task = _route(routine, held.at)
    except DomainError as exc:
        held.outcome, held.reason = Outcome.SKIPPED, _refusal(exc)[:500]
    else:
        held.outcome, held.task = Outcome.CREATED, task
        held.reason = "held until the previous occurrence's task finished"
    held.save(update_fields=["outcome", "task", "reason"])
