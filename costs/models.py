"""What the organization spends: one ledger row per model call (a reservation of its worst case,
settled when it returns, or booked at its worst case by the sweep) and budgets that keep their
own counters, changed under their row lock with the ledger row.
"""

from decimal import Decimal

from django.db import models

from organization.history import audited, related
from organization.models import Agent, Organization, Team
from tasks.models import Task

# Prices are per token fractions of a cent: 9 decimal places hold $0.000000001.
MONEY = {"max_digits": 19, "decimal_places": 9}
ZERO = Decimal(0)
# The most a MONEY column holds. A budget's counters stop here rather than overflow (a budget
# whose counter reached it is exhausted whatever its limit: limits stay below $10,000,000,000).
MONEY_MAX = Decimal("9999999999.999999999")
# The most tokens one call is booked with, in and out each: far above any model's context, far
# below what the PositiveIntegerField columns hold (2**31 - 1). A provider that claims more is
# booked at this.
MAX_CALL_TOKENS = 100_000_000
LIFETIME = "lifetime"
WARNING_SHARE = Decimal("0.8")


def _usage_link(to, related_name: str = "usage_records", **kwargs) -> models.ForeignKey:
    """A usage record's link to what the call belonged to: the record outlives it (null)."""
    return models.ForeignKey(
        to, null=True, blank=True, on_delete=models.SET_NULL, related_name=related_name, **kwargs
    )


def _budget_scope(to) -> models.ForeignKey:
    """What a budget is for, by its scope (null for the others): deleting it deletes the budget."""
    return models.ForeignKey(to, null=True, blank=True, on_delete=models.CASCADE, related_name="+")


class UsagePurpose(models.TextChoices):
    """What a model call was for (the pinned names), and a report from an outside agent."""

    COLLABORATION = "collaboration"
    PLAN = "plan"
    SYNTHESIS = "synthesis"
    JUDGE = "judge"
    RUN = "run"
    REPORTED = "reported"


class UsageState(models.TextChoices):
    RESERVED = "reserved"  # the call is under way: its worst case is held against its budgets
    RECORDED = "recorded"  # the call returned (or failed): its real usage
    EXPIRED = "expired"  # its worker never settled it: counted at its worst case


class PriceSource(models.TextChoices):
    GENAI_PRICES = "genai-prices"
    SETTING = "LLM_PRICES"
    FREE = "free"  # the offline provider: no model was called
    UNKNOWN = "unknown"  # no price known: cost_usd is null (flagged in the admin)
    REPORTED = "reported"  # an outside agent's own report carried its cost


class UsageRecord(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    agent = _usage_link(Agent)
    team = _usage_link(
        Team, related_name="+", help_text="The agent's team at the time of the call."
    )
    purpose = models.CharField(max_length=20, choices=UsagePurpose.choices)
    # What it belongs to. The session and the run are the apps above's models, named lazily:
    # this app sits below them (docs/design.md "Layers").
    session = _usage_link("collaboration.CollaborationSession")
    run = _usage_link("runtime.Run")
    task = _usage_link(Task)
    # Who in a collaboration made the call (its agent key there, or "coordinator").
    label = models.CharField(max_length=100, blank=True, default="")
    provider = models.CharField(max_length=40)
    model = models.CharField(max_length=100)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField("cost (USD)", null=True, blank=True, **MONEY)
    # The price used, kept with the row (USD per million tokens) and where it came from.
    input_usd_per_mtok = models.DecimalField(null=True, blank=True, **MONEY)
    output_usd_per_mtok = models.DecimalField(null=True, blank=True, **MONEY)
    price_source = models.CharField(max_length=20, choices=PriceSource.choices)
    self_reported = models.BooleanField(default=False)
    state = models.CharField(max_length=10, choices=UsageState.choices, default=UsageState.RECORDED)
    reserved_usd = models.DecimalField("reserved (USD)", default=ZERO, **MONEY)
    budget_ids = models.JSONField(default=list, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=False)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["organization", "created_at"], name="usage_org_created"),
            models.Index(fields=["agent", "created_at"], name="usage_agent_created"),
            # The admin's list, newest first, across organizations (a superuser's).
            models.Index(fields=["created_at", "id"], name="usage_created"),
            # The admin's count of unpriced calls, on every load of its list.
            models.Index(
                fields=["organization"],
                name="usage_unpriced",
                condition=models.Q(price_source="unknown"),
            ),
            models.Index(
                fields=["expires_at"],
                name="usage_reserved_expiry",
                condition=models.Q(state="reserved"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model} {self.purpose} ${self.cost_usd}"

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class BudgetScope(models.TextChoices):
    ORGANIZATION = "organization"
    TEAM = "team"
    AGENT = "agent"
    TASK = "task"  # one task tree (the task and its subtasks), lifetime
    COLLABORATION = "collaboration"  # one collaboration (`max_cost_usd`), lifetime


MONTHLY_SCOPES = (BudgetScope.ORGANIZATION, BudgetScope.TEAM, BudgetScope.AGENT)


class BudgetState(models.TextChoices):
    OK = "ok"
    WARNING = "warning"  # 80 % spent or held
    EXHAUSTED = "exhausted"  # nothing left, or a call did not fit this period


class Budget(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=20, choices=BudgetScope.choices)
    team = _budget_scope(Team)
    agent = _budget_scope(Agent)
    task = _budget_scope(Task)
    session = _budget_scope("collaboration.CollaborationSession")
    limit_usd = models.DecimalField(
        **MONEY,
        help_text="Monthly (UTC calendar month) for an organization, team or agent; "
        "for the whole life of a task tree or a collaboration.",
    )
    # "YYYY-MM" the counters are for (monthly), or "lifetime".
    period = models.CharField(max_length=8)
    spent_usd = models.DecimalField("spent (USD)", default=ZERO, **MONEY)
    reserved_usd = models.DecimalField("reserved (USD)", default=ZERO, **MONEY)
    # The period in which each alert was raised (one alert per crossing), and in which a call
    # was refused for not fitting (cleared when the limit changes).
    warned_period = models.CharField(max_length=8, blank=True, default="")
    exhausted_period = models.CharField(max_length=8, blank=True, default="")
    refused_period = models.CharField(max_length=8, blank=True, default="")
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Who set or changed a limit, when; the counters move with every call and are
    # the ledger's story, not the audit's.
    history = audited(
        "budget",
        exclude=[
            "spent_usd",
            "reserved_usd",
            "period",
            "warned_period",
            "exhausted_period",
            "refused_period",
            "updated_at",
        ],
    )

    class Meta:
        ordering = ["scope", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization"],
                condition=models.Q(scope="organization"),
                name="budget_one_per_organization",
            ),
            models.UniqueConstraint(
                fields=["team"], condition=models.Q(scope="team"), name="budget_one_per_team"
            ),
            models.UniqueConstraint(
                fields=["agent"], condition=models.Q(scope="agent"), name="budget_one_per_agent"
            ),
            models.UniqueConstraint(
                fields=["task"], condition=models.Q(scope="task"), name="budget_one_per_task"
            ),
            models.UniqueConstraint(
                fields=["session"],
                condition=models.Q(scope="collaboration"),
                name="budget_one_per_session",
            ),
            models.CheckConstraint(
                condition=models.Q(limit_usd__gte=0), name="budget_limit_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope} budget {self.subject}"

    @property
    def is_monthly(self) -> bool:
        return self.scope in MONTHLY_SCOPES

    @property
    def remaining_usd(self) -> Decimal:
        """What is neither spent nor held by calls under way (negative once overspent)."""
        return self.limit_usd - self.spent_usd - self.reserved_usd

    @property
    def is_overspent(self) -> bool:
        """Spent past its limit: calls it could not refuse (reports, late budgets) took it there."""
        return self.spent_usd > self.limit_usd

    @property
    def overspent_usd(self) -> Decimal:
        return max(self.spent_usd - self.limit_usd, ZERO)

    @property
    def subject(self) -> str:
        """What it covers, in words."""
        # The team or agent may be gone already: deleting it (or the organization) cascades to
        # its budget, whose history label is this (organization/history.py `related`).
        if self.scope == BudgetScope.TEAM:
            team = related(self, "team") if self.team_id else None
            return team.name if team is not None else f"team {self.team_id or '?'}"
        if self.scope == BudgetScope.AGENT:
            agent = related(self, "agent") if self.agent_id else None
            return agent.handle if agent is not None else f"agent {self.agent_id or '?'}"
        if self.scope == BudgetScope.TASK:
            return f"task {self.task_id}"
        if self.scope == BudgetScope.COLLABORATION:
            return f"collaboration {self.session_id}"
        return self.organization.name if self.organization_id else "?"


class AlertKind(models.TextChoices):
    WARNING = "warning"  # 80 % of the limit spent
    EXHAUSTED = "exhausted"


class BudgetAlert(models.Model):
    """An inbox item for the organization's humans: a budget crossed 80 % or ran out. One per
    budget, kind, period and limit (the unique constraint makes "not one per call" hold under
    races; a raised limit is watched afresh)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=10, choices=AlertKind.choices)
    period = models.CharField(max_length=8)
    # The budget's limit when it was raised.
    limit_usd = models.DecimalField("limit (USD)", null=True, blank=True, **MONEY)
    message = models.TextField()
    read_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "kind", "period", "limit_usd"],
                name="budget_alert_once_per_period_and_limit",
            )
        ]

    def __str__(self) -> str:
        return self.message
