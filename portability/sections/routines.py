"""Routines: recurring work owned by a team or an agent, with the fields the API names, validated
by the API's serializer and written by the routines app's services.

Matched by title: the n-th routine of a title in the file is the n-th of that title in the
organization, oldest first (titles need not be unique). The webhook secret is never in the file:
an imported routine gets a new one, shown on its admin page."""

from organization.models import Organization
from routines import services
from routines.models import Routine
from routines.serializers import RoutineInputSerializer

from .base import Context, Entry


def _exported(routine: Routine) -> dict:
    row = {name: getattr(routine, name) for name in services.FIELDS}
    row["team"] = routine.team.name if routine.team_id else None
    row["agent"] = routine.agent.handle if routine.agent_id else None
    return row


def export_routines(org: Organization) -> list[dict]:
    routines = Routine.objects.filter(organization=org).select_related("team", "agent")
    return [_exported(routine) for routine in routines.order_by("title", "pk")]


def apply_routine(context: Context, entry: Entry) -> None:
    routine = None
    if not entry.is_new:
        named = Routine.objects.filter(organization=context.org, title=entry.item["title"])
        routine = named.order_by("pk")[entry.occurrence - 1]
    body = RoutineInputSerializer(data=entry.item, partial=routine is not None)
    body.is_valid(raise_exception=True)
    if routine is None:
        services.routine_create(organization=context.org, **body.validated_data)
    else:
        services.routine_update(routine=routine, **body.validated_data)
