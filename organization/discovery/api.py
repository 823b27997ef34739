"""Thin views of expert discovery (seed 002)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import discovery, registry
from ..caller import CallerMixin
from ..schema import ERRORS
from ..serializers import DiscoverQuerySerializer
from ..tools import visible_prompt_subject


class ExpertSerializer(serializers.Serializer):
    agent_id = serializers.CharField()
    expert_id = serializers.IntegerField()
    name = serializers.CharField()
    role = serializers.CharField()
    worktree_path = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=[discovery.IDLE, discovery.BUSY])


class ExpertsSerializer(serializers.Serializer):
    agent_id = serializers.CharField(allow_null=True)
    expert_id = serializers.IntegerField(allow_null=True)
    worktree_path = serializers.CharField(allow_null=True)
    experts = ExpertSerializer(many=True)


class StatusReportSerializer(serializers.Serializer):
    status = serializers.CharField(
        help_text=f"'{discovery.PENDING}' (idle) or '{discovery.PROCESSING}' (busy); trimmed."
    )


class StatusSerializer(serializers.Serializer):
    agent_id = serializers.CharField()
    expert_id = serializers.IntegerField()
    runtime_status = serializers.CharField()
    status = serializers.ChoiceField(choices=[discovery.IDLE, discovery.BUSY])
    updated_at = serializers.DateTimeField()


class SubagentSerializer(serializers.Serializer):
    description = serializers.CharField()
    prompt = serializers.CharField()


class SubagentsSerializer(serializers.Serializer):
    expert_discovery = SubagentSerializer(required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The seed's key has a hyphen, which a Python attribute cannot.
        self.fields["expert-discovery"] = self.fields.pop("expert_discovery")


class DiscoveryPromptSerializer(serializers.Serializer):
    agent_id = serializers.CharField()
    expert_id = serializers.IntegerField()
    worktree_path = serializers.CharField(allow_null=True)
    manifest_path = serializers.CharField()
    status_dir = serializers.CharField()
    agents = SubagentsSerializer()


class ExpertsView(CallerMixin, APIView):
    @extend_schema(
        parameters=[DiscoverQuerySerializer],
        responses={200: ExpertsSerializer, **ERRORS},
        summary="Seed 002: the experts sharing your worktree, idle or busy",
    )
    def get(self, request):
        query = DiscoverQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        agent_param = query.validated_data.get("agent")
        return Response(discovery.discover(caller=self.caller, agent_param=agent_param))


class AgentStatusView(CallerMixin, APIView):
    @extend_schema(
        request=StatusReportSerializer,
        responses={200: StatusSerializer, **ERRORS},
        summary="Seed 002: report your runtime status (pending or processing)",
    )
    def post(self, request):
        agent = self.caller.require_agent()
        registry.check_identity(self.caller, request.data)
        body = StatusReportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        runtime = discovery.agent_report_status(agent=agent, status=body.validated_data["status"])
        return Response(
            {
                "agent_id": agent.handle,
                "expert_id": agent.pk,
                "runtime_status": runtime.value,
                "status": runtime.status,
                "updated_at": runtime.at,
            }
        )


class DiscoveryPromptView(CallerMixin, APIView):
    @extend_schema(
        responses={200: DiscoveryPromptSerializer, **ERRORS},
        summary="Seed 002: the expert-discovery subagent prompt of an agent",
    )
    def get(self, request, agent_id: str):
        # Like system prompts: an agent reads its own; another's is as if it did not exist.
        agent = visible_prompt_subject(self.caller, agent_id)
        return Response(discovery.discovery_prompt_for(agent))
