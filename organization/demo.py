"""The demo organization of the seeds (Sarah, Alex, Jordan, Morgan, Taylor …), built idempotently."""

from django.db import transaction

from tasks.models import HELD_STATUSES, Task, TaskStatus

from .models import Agent, AgentRole, ExpertiseGroup, Organization, Team, TeamRule

# id, name, job title, team, senior, expertise, tasks held, paused, hierarchy role
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
def seed_demo(*, slug: str = "demo") -> Organization:
    """Create or repair organization `slug` so it holds exactly the demo agents and workloads."""
    org, _ = Organization.objects.get_or_create(
        slug=slug, defaults={"name": "Demo" if slug == "demo" else slug.replace("-", " ").title()}
    )
    TeamRule.objects.get_or_create(organization=org)
    teams = {
        name: Team.objects.get_or_create(organization=org, name=name)[0]
        for name in sorted({row[3] for row in DEMO_AGENTS})
    }
    agents: dict[str, Agent] = {}
    for handle, name, title, team, _, expertise, _, paused, _ in DEMO_AGENTS:
        agents[handle], _ = Agent.objects.update_or_create(
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
    for handle, _, _, _, senior, _, held, _, hierarchy_role in DEMO_AGENTS:
        agent = agents[handle]
        agent.senior = agents[senior] if senior else None
        agent.save(update_fields=["senior"])
        AgentRole.objects.update_or_create(agent=agent, defaults={"role": hierarchy_role})
        _set_held_tasks(org, agent, held)
    for group, expertise in DEMO_EXPERTISE_GROUPS.items():
        ExpertiseGroup.objects.update_or_create(
            organization=org, name=group, defaults={"expertise": expertise}
        )
    return org


def _set_held_tasks(org: Organization, agent: Agent, count: int) -> None:
    held = list(Task.objects.filter(assignee=agent, status__in=HELD_STATUSES).order_by("pk"))
    for task in held[count:]:
        task.status = TaskStatus.COMPLETED
        task.save(update_fields=["status", "updated_at"])
    for n in range(len(held), count):
        Task.objects.create(
            organization=org,
            title=f"{agent.name}'s demo task {n + 1}",
            description="Seeded by seed_demo so that the demo workload is made of real tasks.",
            required_expertise=agent.expertise[0] if agent.expertise else "",
            status=TaskStatus.ASSIGNED if n % 2 == 0 else TaskStatus.IN_PROGRESS,
            assignee=agent,
            delegation_chain=[agent.handle],
        )
