"""The ledger, the totals and the budgets as the API shows them, and the bodies it takes."""

from decimal import Context, Decimal

from rest_framework import serializers

from infrastructure.inputs import BIGINT_MAX

from .budgets import state_of
from .models import (
    MAX_CALL_TOKENS,
    MONTHLY_SCOPES,
    ZERO,
    Budget,
    BudgetAlert,
    BudgetScope,
    UsageRecord,
)

# The most one self-reported call may cost (docs/costs.md): ten times the dearest call a
# published price list allows today, and small enough that no sum of reports an agent can make
# comes near what the ledger's and the budgets' columns hold.
MAX_REPORTED_COST_USD = Decimal(1000)


class UsdField(serializers.DecimalField):
    """An amount of USD in an answer, with 9 decimal places and as many digits as it has: totals are
    unbounded database sums, so no `max_digits` may cap them (DRF would answer 500)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("read_only", True)
        super().__init__(max_digits=None, decimal_places=9, coerce_to_string=True, **kwargs)

    def quantize(self, value: Decimal) -> Decimal:
        # One more than the figures kept: rounding may carry into a new one (9.9999999996 → 10.0…).
        digits = max(value.adjusted(), 0) + 2 + self.decimal_places
        return value.quantize(Decimal(1).scaleb(-self.decimal_places), context=Context(digits))


class UsageRecordSerializer(serializers.ModelSerializer):
    agent = serializers.SlugRelatedField(slug_field="handle", read_only=True, allow_null=True)
    team = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    session = serializers.UUIDField(source="session_id", read_only=True, allow_null=True)
    run = serializers.IntegerField(source="run_id", read_only=True, allow_null=True)
    task = serializers.IntegerField(source="task_id", read_only=True, allow_null=True)
    cost_usd = UsdField(allow_null=True)
    reserved_usd = UsdField()
    input_usd_per_mtok = UsdField(allow_null=True)
    output_usd_per_mtok = UsdField(allow_null=True)

    class Meta:
        model = UsageRecord
        fields = [
            "id",
            "agent",
            "team",
            "purpose",
            "session",
            "label",
            "run",
            "task",
            "provider",
            "model",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "input_usd_per_mtok",
            "output_usd_per_mtok",
            "price_source",
            "self_reported",
            "state",
            "reserved_usd",
            "error",
            "created_at",
            "settled_at",
        ]
        read_only_fields = fields


def task_in_body(help_text: str) -> serializers.IntegerField:
    """A body's optional task id; null or left out: none."""
    return serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=BIGINT_MAX, help_text=help_text
    )


def usd_in_body(help_text: str, **kwargs) -> serializers.DecimalField:
    """A body's optional amount of USD, not negative, as a MONEY column holds it."""
    return serializers.DecimalField(
        required=False,
        max_digits=19,
        decimal_places=9,
        min_value=Decimal(0),
        help_text=help_text,
        **kwargs,
    )


class UsageReportSerializer(serializers.Serializer):
    """`POST /api/usage` and the `report_usage` tool: a call an outside agent made itself."""

    provider = serializers.CharField(
        max_length=40, help_text="Who served the call: openai, anthropic, ollama …"
    )
    model = serializers.CharField(max_length=100, help_text="The model, as the provider names it.")
    prompt_tokens = serializers.IntegerField(
        min_value=0, max_value=MAX_CALL_TOKENS, help_text="Input tokens the provider reported."
    )
    completion_tokens = serializers.IntegerField(
        min_value=0, max_value=MAX_CALL_TOKENS, help_text="Output tokens the provider reported."
    )
    task = task_in_body("The task the call was for (one you can see).")
    cost_usd = usd_in_body(
        "What it cost in USD (at most 1000), used only when the service knows no price for the "
        "model.",
        allow_null=True,
        max_value=MAX_REPORTED_COST_USD,
        error_messages={
            "max_value": (
                f"One call costs at most ${MAX_REPORTED_COST_USD} (USD) here; report each call "
                "on its own."
            )
        },
    )


GROUP_BY = ["agent", "team", "model", "day", "purpose"]


class CostQuerySerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=GROUP_BY, help_text="What each row totals.")
    since = serializers.DateTimeField(required=False, help_text="From this time (inclusive).")
    until = serializers.DateTimeField(required=False, help_text="Up to this time (exclusive).")


class CostRowSerializer(serializers.Serializer):
    key = serializers.CharField(allow_null=True)
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = UsdField()
    calls = serializers.IntegerField()


class BudgetSetSerializer(serializers.Serializer):
    """`POST /api/budgets`: a monthly limit for the organization, a team or an agent, or a
    lifetime limit for a task tree. Setting it again changes the limit."""

    scope = serializers.ChoiceField(choices=[s for s in BudgetScope.values if s != "collaboration"])
    team = serializers.CharField(required=False, allow_null=True, help_text="The team's name.")
    agent = serializers.CharField(required=False, allow_null=True, help_text="The agent's id.")
    task = task_in_body("The root of the task tree (scope task).")
    monthly_limit_usd = usd_in_body("USD per calendar month (UTC): organization, team, agent.")
    limit_usd = usd_in_body("USD for the whole life of a task tree (scope task).")

    def validate(self, data):
        monthly = data["scope"] in MONTHLY_SCOPES
        name = "monthly_limit_usd" if monthly else "limit_usd"
        other = "limit_usd" if monthly else "monthly_limit_usd"
        if data.get(other) is not None:
            raise serializers.ValidationError({other: f"A {data['scope']} budget takes {name}."})
        if data.get(name) is None:
            raise serializers.ValidationError({name: "This field is required."})
        return data


class BudgetSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    agent = serializers.SlugRelatedField(slug_field="handle", read_only=True, allow_null=True)
    task = serializers.IntegerField(source="task_id", read_only=True, allow_null=True)
    collaboration = serializers.UUIDField(source="session_id", read_only=True, allow_null=True)
    monthly_limit_usd = serializers.SerializerMethodField()
    limit_usd = UsdField()
    spent_usd = UsdField()
    reserved_usd = UsdField()
    remaining_usd = serializers.SerializerMethodField()
    state = serializers.SerializerMethodField()

    class Meta:
        model = Budget
        fields = [
            "id",
            "scope",
            "team",
            "agent",
            "task",
            "collaboration",
            "monthly_limit_usd",
            "limit_usd",
            "period",
            "spent_usd",
            "reserved_usd",
            "remaining_usd",
            "state",
            "created_by",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def to_representation(self, budget):
        from .budgets import current_view

        return super().to_representation(current_view(budget))

    def get_monthly_limit_usd(self, budget) -> str | None:
        return f"{budget.limit_usd:.9f}" if budget.is_monthly else None

    def get_remaining_usd(self, budget) -> str:
        return f"{max(budget.remaining_usd, ZERO):.9f}"

    def get_state(self, budget) -> str:
        return state_of(budget)


class AlertBudgetSerializer(serializers.Serializer):
    """An alert's budget as it is now (its message says what it was when the alert was raised)."""

    id = serializers.IntegerField()
    scope = serializers.CharField()
    subject = serializers.CharField()
    period = serializers.CharField()
    limit_usd = UsdField()
    spent_usd = UsdField()
    state = serializers.SerializerMethodField()
    overspent_usd = serializers.SerializerMethodField(
        help_text="How far its spending is past its limit (calls it could not refuse), or 0."
    )

    def to_representation(self, budget):
        from .budgets import current_view

        return super().to_representation(current_view(budget))

    def get_state(self, budget) -> str:
        return state_of(budget)

    def get_overspent_usd(self, budget) -> str:
        return f"{budget.overspent_usd:.9f}"


class BudgetAlertSerializer(serializers.ModelSerializer):
    budget = serializers.PrimaryKeyRelatedField(read_only=True)
    limit_usd = UsdField(allow_null=True, help_text="The budget's limit when it was raised.")
    budget_now = AlertBudgetSerializer(source="budget", read_only=True)

    class Meta:
        model = BudgetAlert
        fields = [
            "id",
            "budget",
            "kind",
            "period",
            "limit_usd",
            "message",
            "budget_now",
            "read_at",
            "created_at",
        ]
        read_only_fields = fields
