"""The demo's routine: a weekly dependency review Development owns (added once, never changed)."""

from organization.models import Organization, Team

from .models import Routine
from .services import routine_create

DEMO_ROUTINE = {
    "title": "Weekly dependency review ({date})",
    "description": (
        "Review this week's dependency updates and security advisories ({date}): advisories "
        "first, then major versions; open a subtask for each upgrade that needs work."
    ),
    "required_expertise": "Node.js",
    "team": "Development",
    "cron": "0 9 * * 1",
    "timezone": "UTC",
}


def seed_demo_routines(org: Organization) -> Routine | None:
    """The demo routine if it is missing (and its team exists); None when nothing was added."""
    exists = Routine.objects.filter(organization=org, title=DEMO_ROUTINE["title"]).exists()
    if exists or not Team.objects.filter(organization=org, name=DEMO_ROUTINE["team"]).exists():
        return None
    routine, _ = routine_create(organization=org, **DEMO_ROUTINE)
    return routine
