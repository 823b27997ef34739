"""How work reaches the runtime: the signals of the apps below, connected in apps.py.

- `tasks.signals.work_reached_agent` (after the move's commit): wake the agent if it is managed;
- `costs.budgets.budget_made_room` (after the commit of a budget change that released the agents
  it held back, or a new month): wake the managed agents it covers whose work waited for it;
- `organization.services.agent_gained_room` (an agent resumed or given room, inside the write's
  transaction): once it commits, wake the agent if it is managed and work waits for it.

The event's agent says whether it is managed without a query; an external agent costs nothing.
"""

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
