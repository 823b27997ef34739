from rest_framework import serializers

from .roster import ROSTER_FILTERS


class ErrorSerializer(serializers.Serializer):
    success = serializers.BooleanField(default=False)
    error = serializers.CharField()
    code = serializers.CharField()


class RosterQuerySerializer(serializers.Serializer):
    filter = serializers.ChoiceField(choices=ROSTER_FILTERS, required=False, default="all")
    expertise = serializers.CharField(required=False)
    expertise_match = serializers.ChoiceField(
        choices=["exact", "ignore_case"], required=False, default="exact"
    )
    agent = serializers.CharField(
        required=False, help_text="Organization keys and admins: whose roster (agent id)."
    )


class ColleagueSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    role = serializers.CharField()
    team = serializers.CharField(allow_null=True)
    seniorId = serializers.CharField(allow_null=True)
    expertise = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=["idle", "active", "busy", "offline"])
    current_workload = serializers.IntegerField()
    workload_capacity = serializers.IntegerField()
    availability_until = serializers.DateTimeField(allow_null=True)


class RosterSerializer(serializers.Serializer):
    agent_context = ColleagueSerializer(allow_null=True)
    colleagues = ColleagueSerializer(many=True)


class CallToolSerializer(serializers.Serializer):
    toolName = serializers.CharField()
    params = serializers.DictField(required=False, default=dict)
    agentId = serializers.CharField(required=False, help_text="Ignored unless it differs: 403.")
    organizationId = serializers.CharField(
        required=False, help_text="Ignored unless it differs: 403."
    )


class ToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    inputSchema = serializers.DictField()
    readOnly = serializers.BooleanField()
