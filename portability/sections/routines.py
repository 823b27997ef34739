"""Routines: recurring work owned by a team or an agent. This install has none to export, and
refuses a file that lists some rather than drop them unseen."""

from infrastructure.errors import Invalid
from organization.models import Organization

from .base import Context, Entry


def export_routines(org: Organization) -> list[dict]:
    return []


def apply_routine(context: Context, entry: Entry) -> None:
    raise Invalid("This install has no routines: a file that lists some cannot be imported here.")
