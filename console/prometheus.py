"""`/metrics`: the organizations' own series in Prometheus' text format, read from the database at
scrape time, so every web process answers the same whatever process did the work; with them the
HTTP and database series of django-prometheus, summed over the server's processes.

Served only with METRICS_TOKEN set, and only to `Authorization: Bearer <METRICS_TOKEN>`
(docs/observability.md lists the series)."""

import hmac
import os

from django.conf import settings
from django.db.models import Count, Min, Sum
from django.http import Http404, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from costs.models import MONTHLY_SCOPES, Budget, UsageRecord
from costs.periods import current_period
from runtime.models import Run
from tasks.models import (
    DecisionStatus,
    DeliveryStatus,
    EventKind,
    HumanDecision,
    RefusalCount,
    Task,
    TaskEvent,
    TaskStatus,
    WebhookDelivery,
)

ORG = "organization__slug"


def _grouped(queryset, *keys: str, **values):
    """Rows of `queryset` grouped by `keys`, with the aggregates `values`."""
    return queryset.order_by().values(*keys).annotate(**values)


def _counts(family, queryset, *keys: str):
    """`family` with the rows of `queryset` counted by organization and `keys`."""
    for row in _grouped(queryset, ORG, *keys, n=Count("pk")):
        family.add_metric([row[ORG], *(row[key] for key in keys)], row["n"])
    return family


class OrganizationCollector(Collector):
    """Every organization's series, one statement each."""

    def collect(self):
        now = timezone.now()
        yield _counts(
            GaugeMetricFamily(
                "agent_org_tasks", "Tasks by status.", labels=["organization", "status"]
            ),
            Task.objects.all(),
            "status",
        )
        oldest = GaugeMetricFamily(
            "agent_org_queue_oldest_seconds",
            "How long the oldest queued task has waited.",
            labels=["organization"],
        )
        queued = Task.objects.filter(status=TaskStatus.QUEUED, queued_at__isnull=False)
        for row in _grouped(queued, ORG, at=Min("queued_at")):
            oldest.add_metric([row[ORG]], max(0.0, (now - row["at"]).total_seconds()))
        yield oldest
        yield _counts(
            GaugeMetricFamily(
                "agent_org_runs", "Managed runs by status.", labels=["organization", "status"]
            ),
            Run.objects.all(),
            "status",
        )
        yield from _ledger()
        refusals = CounterMetricFamily(
            "agent_org_refusals",
            "Refused moves, by the rule's code.",
            labels=["organization", "code"],
        )
        for row in RefusalCount.objects.order_by().values(ORG, "code", "count"):
            refusals.add_metric([row[ORG], row["code"]], row["count"])
        yield refusals
        yield _counts(
            CounterMetricFamily(
                "agent_org_escalations", "Escalations in the audit trail.", labels=["organization"]
            ),
            TaskEvent.objects.filter(kind=EventKind.ESCALATED),
        )
        yield _counts(
            GaugeMetricFamily(
                "agent_org_decisions_pending",
                "Decisions waiting for a human.",
                labels=["organization"],
            ),
            HumanDecision.objects.filter(status=DecisionStatus.PENDING),
        )
        yield _counts(
            CounterMetricFamily(
                "agent_org_webhook_failures",
                "Webhook deliveries given up after their attempts.",
                labels=["organization"],
            ),
            WebhookDelivery.objects.filter(status=DeliveryStatus.FAILED),
        )
        yield _budgets_remaining(now)


def _ledger():
    """Model calls by provider and model, and their cost by model, from one statement."""
    calls = CounterMetricFamily(
        "agent_org_model_calls",
        "Model calls booked in the cost ledger.",
        labels=["organization", "provider", "model"],
    )
    cost = CounterMetricFamily(
        "agent_org_cost_usd", "What the model calls cost, in USD.", labels=["organization", "model"]
    )
    by_model: dict[tuple[str, str], float] = {}
    rows = _grouped(
        UsageRecord.objects.all(), ORG, "provider", "model", n=Count("pk"), usd=Sum("cost_usd")
    )
    for row in rows:
        calls.add_metric([row[ORG], row["provider"], row["model"]], row["n"])
        key = (row[ORG], row["model"])
        by_model[key] = by_model.get(key, 0.0) + float(row["usd"] or 0)
    for labels, usd in by_model.items():
        cost.add_metric(list(labels), usd)
    return calls, cost


def _budgets_remaining(now) -> GaugeMetricFamily:
    """What the organization's budgets have left, summed by scope (`Budget.remaining_usd`; a
    monthly budget not rolled into this month yet has spent nothing of it)."""
    remaining = GaugeMetricFamily(
        "agent_org_budget_remaining_usd",
        "What the budgets have left (USD), by scope.",
        labels=["organization", "scope"],
    )
    this_month = current_period(now)
    left: dict[tuple[str, str], float] = {}
    rows = Budget.objects.order_by().values_list(
        ORG, "scope", "period", "limit_usd", "spent_usd", "reserved_usd"
    )
    for org, scope, period, limit, spent, reserved in rows:
        if scope in MONTHLY_SCOPES and period != this_month:
            spent = 0
        key = (org, scope)
        left[key] = left.get(key, 0.0) + float(limit - spent - reserved)
    for labels, usd in left.items():
        remaining.add_metric(list(labels), usd)
    return remaining


ORGANIZATIONS = CollectorRegistry(auto_describe=False)
ORGANIZATIONS.register(OrganizationCollector())


def process_series() -> bytes:
    """django-prometheus' series: under `config.serve` (PROMETHEUS_MULTIPROC_DIR, which it sets)
    every server process's samples summed from their files, else this process's own."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)
    return generate_latest(registry)


def metrics(request) -> HttpResponse:
    """The series, for `Authorization: Bearer <METRICS_TOKEN>` only (unset: not served, 404)."""
    token = settings.METRICS_TOKEN
    if not token:
        raise Http404
    given = request.headers.get("Authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return HttpResponse(
            "Authorization: Bearer <METRICS_TOKEN> required.\n",
            status=401,
            content_type="text/plain",
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    return HttpResponse(
        generate_latest(ORGANIZATIONS) + process_series(), content_type=CONTENT_TYPE_LATEST
    )
