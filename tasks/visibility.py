"""Which of its organization's tasks an agent may see: the one rule every read and move uses."""

from django.db.models import Q, QuerySet

from organization.models import Agent, named_in_delegation_chain

from .models import Task


def visible_to_agent(agent: Agent) -> Q:
    """Created, held, queued for, or part of the delegation chain of."""
    return (
        Q(created_by_agent=agent)
        | Q(assignee=agent)
        | Q(queued_for=agent)
        | named_in_delegation_chain(agent.handle)
    )


def tasks_visible(organization_id: int, agent: Agent | None) -> QuerySet[Task]:
    """The organization's tasks that `agent` may see (all of them for a human: None)."""
    tasks = Task.objects.filter(organization_id=organization_id)
    return tasks if agent is None else tasks.filter(visible_to_agent(agent))
