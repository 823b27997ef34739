"""Thin views of the A2A agent cards (protocol 0.3): one agent's card and the index."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from infrastructure.links import absolute_url
from infrastructure.pagination import LimitOffsetPagination

from ..caller import CallerMixin
from ..schema import ERRORS
from . import cards


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
    count = serializers.IntegerField(help_text="All the organization's agents.")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    cards = AgentCardSerializer(many=True, help_text="A page of cards (`limit`, `offset`).")


CARD = OpenApiResponse(AgentCardSerializer, description="An A2A Agent Card (protocol 0.3)")


class AgentCardView(CallerMixin, APIView):
    @extend_schema(responses={200: CARD, **ERRORS}, summary="The A2A Agent Card of an agent")
    def get(self, request, agent_id: str):
        base_url = absolute_url(request)
        card = cards.card_for(
            org=self.caller.organization,
            handle=agent_id,
            base_url=base_url,
            viewer=self.caller.agent,
        )
        return Response(card)


class AgentCardIndexView(CallerMixin, APIView):
    # Paged like every list under /api/: a card is large (a skill per expertise).
    pagination_class = LimitOffsetPagination

    @extend_schema(
        responses={
            200: OpenApiResponse(AgentCardIndexSerializer, description="Every agent's A2A card"),
            **ERRORS,
        },
        summary="The organization's A2A card index, a page at a time",
        parameters=[
            OpenApiParameter(
                "limit", int, description="How many cards (API_MAX_PAGE_SIZE at most)."
            ),
            OpenApiParameter("offset", int, description="How many agents to skip, by agent id."),
        ],
    )
    def get(self, request):
        paginator = self.pagination_class()
        agents = cards.agents_for_cards(org=self.caller.organization)
        page = paginator.paginate_queryset(agents, request, view=self)
        found = cards.cards_for(page, base_url=absolute_url(request), viewer=self.caller.agent)
        return Response(
            {
                "count": paginator.count,
                "next": paginator.get_next_link(),
                "previous": paginator.get_previous_link(),
                "cards": found,
            }
        )
