"""The delegation recommendation: the `recommend_delegate` params, its candidates and answer."""

from rest_framework import serializers

from ..models import Decision, Urgency
from .fields import OptionalChoiceField


class RecommendationParamsSerializer(serializers.Serializer):
    """Seed 001's delegation framework: the `recommend_delegate` tool's params."""

    expertise = serializers.CharField(help_text="The expertise the task needs.")
    urgency = OptionalChoiceField(
        choices=Urgency.choices, required=False, default=Urgency.NORMAL, help_text="Default normal."
    )
    exclude = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        default=list,
        help_text="Agent ids to leave out.",
    )
    agent = serializers.CharField(
        required=False, allow_blank=True, help_text="Organization keys and admins: for which agent."
    )


class RecommendationQuerySerializer(RecommendationParamsSerializer):
    """`GET /api/recommendations`: the same params, `exclude` written in one query value."""

    exclude = serializers.CharField(
        required=False, default="", allow_blank=True, help_text="Comma-separated agent ids."
    )

    def validate_exclude(self, value: str) -> list[str]:
        return [h.strip() for h in value.split(",") if h.strip()]


class CandidateSerializer(serializers.Serializer):
    id = serializers.CharField(allow_null=True)
    name = serializers.CharField()
    role = serializers.CharField(allow_blank=True)
    team = serializers.CharField(allow_null=True)
    tier = serializers.IntegerField()
    tier_name = serializers.CharField()
    reason = serializers.CharField()
    status = serializers.CharField(allow_null=True)
    current_workload = serializers.IntegerField(allow_null=True)
    workload_capacity = serializers.IntegerField(allow_null=True)
    availability_until = serializers.DateTimeField(
        allow_null=True, help_text="When the colleague expects to be free (their own estimate)."
    )
    estimated_wait_seconds = serializers.IntegerField(allow_null=True)
    held_for_budget = serializers.CharField(
        allow_null=True,
        help_text="Why a budget holds this managed agent back (its runs wait), in words; null "
        "when none does.",
    )


class RecommendationSerializer(serializers.Serializer):
    expertise = serializers.CharField()
    urgency = serializers.CharField()
    related_expertise = serializers.ListField(child=serializers.CharField())
    decision = serializers.ChoiceField(choices=Decision.choices)
    primary_choice = CandidateSerializer()
    fallback = CandidateSerializer(allow_null=True)
    escalate_to = CandidateSerializer()
    reasoning = serializers.CharField()
    cross_team = serializers.BooleanField(
        help_text="The primary choice is neither on the asking agent's team nor down its "
        "reporting line (note the coordination)."
    )
    candidates = CandidateSerializer(many=True)
    decision_text = serializers.CharField()
