"""How work reaches the runtime: the signals of the apps below (connected in apps.py) wake or
resume managed agents, and send a remote A2A agent its work; an external agent costs nothing."""

from functools import partial

from django.db import transaction

from . import remote_a2a, services


def on_work_reached_agent(sender, agent, trigger, task, **kwargs) -> None:
    if agent.is_managed:
        services.run_wake(agent=agent, trigger=trigger, task=task)
    elif agent.is_remote_a2a:
        remote_a2a.on_work(agent=agent, trigger=trigger, task=task)


def on_agent_gained_room(sender, agent, **kwargs) -> None:
    if agent.is_remote_a2a:
        transaction.on_commit(partial(remote_a2a.send_held, agent_id=agent.pk), robust=True)
        return
    transaction.on_commit(partial(services.run_resume, agent_id=agent.pk), robust=True)


def on_budget_made_room(sender, organization_id, team_id=None, agent_id=None, **kwargs) -> None:
    services.wake_after_budget(organization_id=organization_id, team_id=team_id, agent_id=agent_id)
