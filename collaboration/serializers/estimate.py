"""The answer of `POST /api/collaborations/estimate`."""

from rest_framework import serializers

from costs.serializers import UsdField


class EstimateBudgetSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="Null: the request's max_cost_usd.")
    scope = serializers.CharField()
    subject = serializers.CharField()
    estimated_cost_usd = UsdField()
    remaining_usd = UsdField(
        allow_null=True, help_text="Null for an agent when the budget does not cover its own calls."
    )
    fits = serializers.BooleanField()


class EstimateSerializer(serializers.Serializer):
    """`POST /api/collaborations/estimate`: the worst case of the calls it plans."""

    estimated_cost_usd = UsdField()
    estimated_tokens = serializers.IntegerField()
    unpriced_models = serializers.ListField(
        child=serializers.CharField(), help_text="Models with no known price (counted as 0)."
    )
    budgets = EstimateBudgetSerializer(many=True)
