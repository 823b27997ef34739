"""An agent's page opens on its live state (console/agent_state.py): its held tasks cut to the
latest, and links to its own acts and runs only."""

import re

from django.urls import reverse

from tasks.models import (
    TaskEvent,
)
from tests.factories import give_tasks, make_agent, make_org


def test_the_agent_page_lists_at_most_ten_held_tasks(root_client, db):
    org = make_org("acme")
    agent = make_agent(org, "agent-big", workload_capacity=50)
    give_tasks(agent, 30)
    response = root_client.get(reverse("admin:organization_agent_change", args=[agent.pk]))
    assert response.status_code == 200
    held = response.content.decode().split('id="agent-held"')[1].split('id="agent-queue"')[0]
    assert held.count("/admin/tasks/task/") - 1 == 10  # minus the "All its tasks" link
    assert "Holds (30)" in held


def test_the_agent_pages_links_list_its_own_acts_and_runs_only(root_client, db):
    """A superuser's agent page links to all the agent's acts and runs by its row: a search of
    its handle also listed the runs and events of another organization's agent-a."""

    from runtime.models import Run

    mine, theirs = (make_agent(make_org(slug), "agent-a") for slug in ("acme", "zeta"))
    for agent in (mine, theirs):
        give_tasks(agent, 1)
        Run.objects.create(organization=agent.organization, agent=agent, trigger="assigned")
        TaskEvent.objects.create(
            organization=agent.organization,
            task=agent.held_tasks.first(),
            kind="status_changed",
            actor_agent=agent,
        )
    page = root_client.get(reverse("admin:organization_agent_change", args=[mine.pk]))
    html = page.content.decode()
    for anchor, model in (("agent-acts-link", TaskEvent), ("agent-runs-link", Run)):
        url = re.search(rf'href="([^"]+)" id="{anchor}"', html).group(1).replace("&amp;", "&")
        listed = root_client.get(url)
        assert listed.status_code == 200, (anchor, listed.status_code)
        shown = {row.pk for row in listed.context["cl"].result_list}
        owner = "actor_agent" if model is TaskEvent else "agent"
        assert shown == set(model.objects.filter(**{owner: mine}).values_list("pk", flat=True))
        assert shown
