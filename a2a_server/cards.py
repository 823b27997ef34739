"""A2A v1.0 agent cards, built with the official SDK's protobuf types (public: discovery)."""

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import a2a_pb2 as pb
from django.utils.text import slugify
from google.protobuf.struct_pb2 import Struct

from infrastructure.errors import NotFound
from organization.models import Agent, Organization
from organization.workload import agents_with_workload, status_for
from tasks.models import Task, TaskStatus

from .conformance import ORG_SLUG

PROTOCOL_VERSION = "1.0"
CARD_VERSION = "0.1.0"
AVAILABILITY_URI = "urn:agent-org:availability:v1"
SCHEME = "bearer"
MODES = ["text/plain", "application/json"]


def base_url_of(site: str, org: Organization, agent: Agent) -> str:
    """The agent's A2A base URL under `site` (PUBLIC_BASE_URL, else the request's)."""
    return f"{site}/a2a/{org.slug}/{agent.handle}"


def organization_of(slug: str) -> Organization:
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        raise NotFound(f"Organization not found: {slug}", "organization_not_found")
    return org


def queue_lengths(agents: list[Agent]) -> dict[int, int]:
    rows = Task.objects.filter(queued_for__in=agents, status=TaskStatus.QUEUED)
    counts: dict[int, int] = {}
    for agent_id in rows.values_list("queued_for_id", flat=True):
        counts[agent_id] = counts.get(agent_id, 0) + 1
    return counts


def skills_of(agent: Agent) -> list[pb.AgentSkill]:
    skills, taken = [], set()
    for term in agent.expertise:
        skill_id = slugify(term) or "skill"
        if skill_id in taken:
            continue
        taken.add(skill_id)
        skills.append(
            pb.AgentSkill(
                id=skill_id,
                name=term,
                description=f"{agent.name} works with {term}.",
                tags=[term],
            )
        )
    return skills


def availability(agent: Agent, queue: int) -> pb.AgentExtension:
    workload = agent.current_workload
    params = Struct()
    params.update(
        {
            "status": status_for(
                is_paused=agent.is_paused, workload=workload, capacity=agent.workload_capacity
            ),
            "workload": workload,
            "capacity": agent.workload_capacity,
            "queue": queue,
        }
    )
    return pb.AgentExtension(
        uri=AVAILABILITY_URI,
        description="Agent Org: the agent's status, workload, capacity and queued tasks.",
        required=False,
        params=params,
    )


def agent_card(agent: Agent, queue: int, site: str) -> pb.AgentCard:
    """The v1.0 card of `agent` (annotated with `current_workload`), its URLs under `site`."""
    org = agent.organization
    base = base_url_of(site, org, agent)
    card = pb.AgentCard(
        name=agent.name,
        description=f"{agent.role or 'Agent'} at {org.name}.",
        # Only the 1.0 interfaces: a 0.3 one would add the 0.3 card's fields (`url`,
        # `preferredTransport`…), which the v1.0 card schema does not admit.
        supported_interfaces=[
            pb.AgentInterface(
                url=f"{base}/", protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION
            ),
            pb.AgentInterface(
                url=base, protocol_binding="HTTP+JSON", protocol_version=PROTOCOL_VERSION
            ),
        ],
        provider=pb.AgentProvider(organization=org.name, url=site),
        version=CARD_VERSION,
        documentation_url=f"{site}/api/docs/",
        capabilities=pb.AgentCapabilities(
            streaming=True, push_notifications=False, extensions=[availability(agent, queue)]
        ),
        default_input_modes=MODES,
        default_output_modes=MODES,
        skills=skills_of(agent),
    )
    if org.slug != ORG_SLUG:  # the conformance kit's agent takes no key
        card.security_schemes[SCHEME].CopyFrom(
            pb.SecurityScheme(
                http_auth_security_scheme=pb.HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    bearer_format="ao_<prefix>_<secret>",
                    description="An Agent Org API key: an agent's acts as it, an organization's as a human.",
                )
            )
        )
        card.security_requirements.append(pb.SecurityRequirement(schemes={SCHEME: pb.StringList()}))
    return card


def card_json(org_slug: str, handle: str, site: str) -> dict:
    """One agent's card as JSON; an unknown organization or agent is not found."""
    org = organization_of(org_slug)
    agent = agents_with_workload(org=org).filter(handle=handle).first()
    if agent is None:
        raise NotFound(f"Agent not found: {handle}", "agent_not_found")
    return agent_card_to_dict(agent_card(agent, queue_lengths([agent]).get(agent.pk, 0), site))


def directory_json(org_slug: str, site: str) -> list[dict]:
    """The organization's cards, by agent id."""
    org = organization_of(org_slug)
    agents = list(agents_with_workload(org=org).order_by("pk"))
    queues = queue_lengths(agents)
    return [
        agent_card_to_dict(agent_card(agent, queues.get(agent.pk, 0), site)) for agent in agents
    ]
