"""The shapes of routines and their occurrences (data only: the services validate the rules)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tasks.models import Urgency

from .models import (
    MIN_INTERVAL_SECONDS,
    ROUTINE_FIELDS,
    CatchUp,
    Concurrency,
    Occurrence,
    Routine,
)


class OccurrenceSerializer(serializers.ModelSerializer):
    task = serializers.IntegerField(source="task_id", allow_null=True)

    class Meta:
        model = Occurrence
        fields = ["at", "outcome", "task", "reason"]


class RoutineInputSerializer(serializers.Serializer):
    """The body of POST (title and an owner and a schedule required) and PATCH (any of them)."""

    title = serializers.CharField(max_length=300)
    description = serializers.CharField(max_length=10_000, allow_blank=True, required=False)
    required_expertise = serializers.CharField(max_length=100, allow_blank=True, required=False)
    urgency = serializers.ChoiceField(choices=Urgency.choices, required=False)
    team = serializers.CharField(
        max_length=100, allow_null=True, required=False, help_text="The owning team's name."
    )
    agent = serializers.CharField(
        max_length=100, allow_null=True, required=False, help_text="The owning agent's id."
    )
    cron = serializers.CharField(
        max_length=100,
        allow_blank=True,
        required=False,
        help_text='Five fields: minute hour day-of-month month day-of-week ("0 9 * * 1").',
    )
    timezone = serializers.CharField(
        max_length=64, required=False, help_text="The cron's time zone (IANA name); UTC."
    )
    interval_seconds = serializers.IntegerField(
        min_value=MIN_INTERVAL_SECONDS, max_value=10 * 365 * 86_400, allow_null=True, required=False
    )
    concurrency = serializers.ChoiceField(choices=Concurrency.choices, required=False)
    catch_up = serializers.ChoiceField(choices=CatchUp.choices, required=False)
    enabled = serializers.BooleanField(required=False)


class RoutineSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.name", allow_null=True, default=None)
    agent = serializers.CharField(source="agent.handle", allow_null=True, default=None)
    last_occurrence = serializers.SerializerMethodField()

    class Meta:
        model = Routine
        fields = [
            "id",
            *ROUTINE_FIELDS,
            "next_run_at",
            "last_occurrence",
            "created_at",
            "updated_at",
        ]

    @extend_schema_field(OccurrenceSerializer(allow_null=True))
    def get_last_occurrence(self, routine):
        last = self.context.get("last", {}).get(routine.pk)
        return OccurrenceSerializer(last).data if last is not None else None


class RoutineCreatedSerializer(RoutineSerializer):
    webhook_secret = serializers.CharField(
        help_text="Signs POST /api/routines/{id}/trigger; shown only in this answer."
    )

    class Meta(RoutineSerializer.Meta):
        fields = [*RoutineSerializer.Meta.fields, "webhook_secret"]


class FiredSerializer(serializers.Serializer):
    """What a run or a trigger answers: the occurrence (`held`: a `queue` routine waits)."""

    at = serializers.DateTimeField()
    outcome = serializers.ChoiceField(choices=["created", "skipped", "held"])
    task = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()
