"""Thin views of expert discovery (seed 002) and A2A agent cards."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from . import cards, discovery
from .caller import resolve_caller
from .links import absolute_url
from .serializers import ErrorSerializer
from .tools import visible_prompt_subject

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Invalid input"),
    401: OpenApiResponse(ErrorSerializer, description="No or bad API key"),
    403: OpenApiResponse(ErrorSerializer, description="A rule forbids it"),
    404: OpenApiResponse(ErrorSerializer, description="Absent or another organization's"),
}


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
    status = serializers.CharField(help_text="'pending' (idle) or 'processing' (busy); trimmed.")


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


AGENT_PARAM = OpenApiParameter(
    "agent", str, description="Organization keys only: whose worktree to look from (an agent id)."
)


class ExpertsView(APIView):
    @extend_schema(
        parameters=[AGENT_PARAM],
        responses={200: ExpertsSerializer, **ERRORS},
        summary="Seed 002: the experts sharing your worktree, idle or busy",
    )
    def get(self, request):
        caller = resolve_caller(request)
        return Response(
            discovery.discover(caller=caller, agent_param=request.query_params.get("agent"))
        )


class AgentStatusView(APIView):
    @extend_schema(
        request=StatusReportSerializer,
        responses={200: StatusSerializer, **ERRORS},
        summary="Seed 002: report your runtime status (pending or processing)",
    )
    def post(self, request):
        agent = resolve_caller(request).require_agent()
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


class DiscoveryPromptView(APIView):
    @extend_schema(
        responses={200: DiscoveryPromptSerializer, **ERRORS},
        summary="Seed 002: the expert-discovery subagent prompt of an agent",
    )
    def get(self, request, agent_id: str):
        # Like system prompts: an agent reads its own; another's is as if it did not exist.
        agent = visible_prompt_subject(resolve_caller(request), agent_id)
        return Response(discovery.discovery_prompt_for(agent))


# The card's shape (cards.agent_card), for the schema only: generated clients parse it.
class CardSkillSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    inputModes = serializers.ListField(child=serializers.CharField())
    outputModes = serializers.ListField(child=serializers.CharField())


class CardExtensionSerializer(serializers.Serializer):
    uri = serializers.CharField()
    description = serializers.CharField()
    required = serializers.BooleanField()
    params = serializers.DictField(help_text="The extension's own fields (see its uri).")


class CardCapabilitiesSerializer(serializers.Serializer):
    streaming = serializers.BooleanField()
    pushNotifications = serializers.BooleanField()
    stateTransitionHistory = serializers.BooleanField()
    extensions = CardExtensionSerializer(many=True)


class CardProviderSerializer(serializers.Serializer):
    organization = serializers.CharField()
    url = serializers.CharField()


class AgentCardSerializer(serializers.Serializer):
    protocolVersion = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    url = serializers.CharField()
    preferredTransport = serializers.CharField()
    version = serializers.CharField()
    provider = CardProviderSerializer()
    documentationUrl = serializers.CharField()
    capabilities = CardCapabilitiesSerializer()
    securitySchemes = serializers.DictField(help_text="By name: the bearer API key scheme.")
    security = serializers.ListField(child=serializers.DictField())
    defaultInputModes = serializers.ListField(child=serializers.CharField())
    defaultOutputModes = serializers.ListField(child=serializers.CharField())
    skills = CardSkillSerializer(many=True)


class AgentCardIndexSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    cards = AgentCardSerializer(many=True)


CARD = OpenApiResponse(AgentCardSerializer, description="An A2A Agent Card (protocol 0.3)")


class AgentCardView(APIView):
    @extend_schema(responses={200: CARD, **ERRORS}, summary="The A2A Agent Card of an agent")
    def get(self, request, agent_id: str):
        caller = resolve_caller(request)
        base_url = absolute_url(request)
        return Response(cards.card_for(org=caller.organization, handle=agent_id, base_url=base_url))


class AgentCardIndexView(APIView):
    @extend_schema(
        responses={
            200: OpenApiResponse(AgentCardIndexSerializer, description="Every agent's A2A card"),
            **ERRORS,
        },
        summary="The organization's A2A card index",
    )
    def get(self, request):
        caller = resolve_caller(request)
        base_url = absolute_url(request)
        found = cards.cards_of(org=caller.organization, base_url=base_url)
        return Response({"count": len(found), "cards": found})
