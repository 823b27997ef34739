"""How work reaches the runtime: the signals of the apps below (connected in apps.py) wake or
resume managed agents; an external agent costs nothing."""

from functools import partial

from django.db import transaction

from . import services


def on_work_reached_agent(sender, agent, trigger, task, **kwargs) -> None:
    if agent.is_managed:
        services.run_wake(agent=agent, trigger=trigger, task=task)


def on_agent_gained_room(sender, agent, **kwargs) -> None:
    transaction.on_commit(partial(services.run_resume, agent_id=agent.pk), robust=True)


def on_budget_made_room(sender, organization_id, team_id=None, agent_id=None, **kwargs) -> None:
    services.wake_after_budget(organization_id=organization_id, team_id=team_id, agent_id=agent_id)
