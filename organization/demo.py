"""The demo organization of the seeds (Sarah, Alex, Jordan, Morgan, Taylor …): its people.

Add-only, so a demo the user changed stays changed; its tasks and collaboration are seeded by
`tasks.demo` and `collaboration.demo` (the `seed_demo` command).
"""

from django.core.exceptions import ValidationError
from django.db import transaction

from .models import Agent, AgentRole, ExpertiseGroup, Organization, Team, TeamRule

# id, name, job title, team, senior, expertise, tasks held, paused, hierarchy role
# (the held counts are what `tasks.demo` builds; they are a public contract of the demo).
DEMO_AGENTS = [
    ("agent-alice", "Alice", "Engineering Manager", "Leadership", None,
     ["Leadership", "Planning"], 4, False, "supervisor"),
    ("agent-sam", "Sam", "Infrastructure Lead", "Infrastructure", "agent-alice",
     ["AWS", "Terraform"], 0, True, "supervisor"),
    ("agent-sarah", "Sarah", "Frontend Developer", "Development", "agent-alice",
     ["React", "TypeScript", "CSS"], 3, False, "worker"),
    ("agent-alex", "Alex", "Backend Developer", "Development", "agent-alice",
     ["Node.js", "PostgreSQL", "API Design"], 1, False, "worker"),
    ("agent-jordan", "Jordan", "DevOps Engineer", "Infrastructure", "agent-sam",
     ["Docker", "Kubernetes", "AWS"], 5, False, "worker"),
    ("agent-database-lead", "Morgan", "Database Lead", "Infrastructure", "agent-sam",
     ["PostgreSQL", "MySQL", "Redis"], 5, False, "specialist"),
    ("agent-taylor", "Taylor", "Designer", "Design", "agent-alice",
     ["Figma", "CSS"], 3, False, "worker"),
]  # fmt: skip

DEMO_EXPERTISE_GROUPS = {
    "Databases": ["PostgreSQL", "MySQL", "Redis"],
    "Frontend": ["React", "TypeScript", "CSS", "Figma"],
    "Infrastructure": ["AWS", "Terraform", "Docker", "Kubernetes"],
}


@transaction.atomic
def seed_demo_organization(*, slug: str = "demo") -> Organization:
    """Add what is missing of organization `slug`'s people; never change what exists."""
    # get_or_create skips the field's validation: an empty slug, spaces or `../..` (which
    # AGENT_ORG_MANIFEST_DIR/<slug> follows out of its directory) would be stored as given.
    # A ValidationError, which the seed_demo command turns into its message.
    Organization._meta.get_field("slug").clean(slug, None)
    org, _ = Organization.objects.get_or_create(
        slug=slug, defaults={"name": "Demo" if slug == "demo" else slug.replace("-", " ").title()}
    )
    TeamRule.objects.get_or_create(organization=org)
    teams = {
        name: Team.objects.get_or_create(organization=org, name=name)[0]
        for name in sorted({row[3] for row in DEMO_AGENTS})
    }
    agents: dict[str, Agent] = {}
    created: set[str] = set()
    for handle, name, title, team, _, expertise, _, paused, _ in DEMO_AGENTS:
        try:
            agents[handle], new = Agent.objects.get_or_create(
                organization=org,
                handle=handle,
                defaults={
                    "name": name,
                    "role": title,
                    "team": teams[team],
                    "expertise": expertise,
                    "is_paused": paused,
                },
            )
        except ValidationError:
            # Deleted by the user, and still in its tasks' delegation chains: a new agent with
            # its id would see them (Agent.save refuses it). The demo goes on without it.
            continue
        if new:
            created.add(handle)
    for handle, _, _, _, senior, _, _, _, hierarchy_role in DEMO_AGENTS:
        if handle not in created:
            continue
        agent = agents[handle]
        if senior in agents:
            agent.senior = agents[senior]
            agent.save(update_fields=["senior"])
        AgentRole.objects.get_or_create(agent=agent, defaults={"role": hierarchy_role})
    for group, expertise in DEMO_EXPERTISE_GROUPS.items():
        ExpertiseGroup.objects.get_or_create(
            organization=org, name=group, defaults={"expertise": expertise}
        )
    return org
