"""The dashboard: which organization it is for (`?organization=<id>`, kept in the session; else
the first the user administers, by name), and what it shows of it."""

from dataclasses import dataclass

from django.template.loader import render_to_string

from infrastructure.inputs import parse_id
from organization.admin.scoping import admin_org_ids
from organization.models import Organization
from tasks.models import Task

from . import metrics

SESSION_KEY = "console_organization"


def organizations_for(request) -> list[Organization]:
    """The organizations the user may see on the dashboard, by name (one query)."""
    ids = admin_org_ids(request)
    orgs = Organization.objects.order_by("name", "pk").only("pk", "name", "slug", "created_at")
    if ids is not None:
        orgs = orgs.filter(pk__in=ids)
    return list(orgs)


def chosen_organization(request, organizations: list[Organization]) -> Organization | None:
    """The organization asked for (remembered), else the one remembered, else the first."""
    by_pk = {org.pk: org for org in organizations}
    asked = parse_id(request.GET.get("organization"))
    if asked in by_pk:
        if request.session.get(SESSION_KEY) != asked:
            request.session[SESSION_KEY] = asked
        return by_pk[asked]
    remembered = by_pk.get(request.session.get(SESSION_KEY))
    if remembered is not None:
        return remembered
    return organizations[0] if organizations else None


@dataclass(frozen=True)
class Shown:
    """A metric as the page shows it."""

    name: str
    label: str
    help: str
    value: object
    text: str
    url: str


def metric_values(org: Organization) -> dict[str, Shown]:
    """Every registered metric of `org` (one query each) and their sum, `needs_attention`."""
    shown = {}
    for metric in metrics.METRICS:
        value = metric.value(org)
        shown[metric.name] = Shown(
            metric.name, metric.label, metric.help, value, metric.text(value), metric.link(org)
        )
    total = sum(shown[m.name].value for m in metrics.METRICS if m.group == metrics.ATTENTION)
    shown[metrics.NEEDS_ATTENTION] = Shown(
        metrics.NEEDS_ATTENTION,
        "Needs attention",
        "Everything below that waits on a human.",
        total,
        str(total),
        # No one list holds them all: the tasks part of it (escalated, blocked or held: the
        # attention reasons registered with the tasks list).
        metrics.changelist(Task, org, attention="needs"),
    )
    return shown


def dashboard_context(request) -> dict:
    organizations = organizations_for(request)
    org = chosen_organization(request, organizations)
    if org is None:
        return {"organizations": [], "organization": None}
    shown = metric_values(org)
    groups = [
        {
            "name": name,
            "title": title,
            "metrics": [shown[m.name] for m in metrics.METRICS if m.group == name],
        }
        for name, title in metrics.GROUPS
    ]
    panels = [
        {
            "name": panel.name,
            "title": panel.title,
            "html": render_to_string(
                panel.template, {"organization": org, **panel.context(org)}, request=request
            ),
        }
        for panel in metrics.PANELS
    ]
    return {
        "organizations": organizations,
        "organization": org,
        "needs_attention": shown[metrics.NEEDS_ATTENTION],
        "groups": [g for g in groups if g["metrics"]],
        "panels": panels,
    }
