"""The notices above a task's story (console/notices.py): a holder a budget holds back says so."""

from django.urls import reverse

from tasks.models import Task
from tests.console.pages import page_of


def held_by_budget(org, handle="agent-alex", limit="0"):
    """The agent made managed, under an exhausted agent budget (as spent this month)."""
    from costs.metering import current_period
    from costs.models import Budget

    agent = org.agents.get(handle=handle)
    agent.runtime = "managed"
    agent.save(update_fields=["runtime"])
    budget = Budget.objects.create(
        organization=org,
        scope="agent",
        agent=agent,
        limit_usd=limit,
        spent_usd=limit,
        period=current_period(),
    )
    return agent, budget


def test_a_task_whose_holder_is_held_for_budget_says_so_with_a_link_to_the_budget(
    root_client, demo
):
    alex, budget = held_by_budget(demo, limit="1")
    task = Task.objects.filter(organization=demo, assignee=alex).first()
    html = page_of(root_client, task)
    notice = html.split('id="notice-held-for-budget"')[1].split("</section>")[0]
    assert "Held for budget: Alex cannot work on it." in notice
    assert "agent budget “agent-alex” has no room this month: $1.00 spent of $1.00" in notice
    assert reverse("admin:costs_budget_change", args=[budget.pk]) in notice


def test_no_budget_notice_for_an_external_holder_or_a_budget_with_room(root_client, demo):
    alex, budget = held_by_budget(demo, limit="1")
    task = Task.objects.filter(organization=demo, assignee=alex).first()
    budget.limit_usd = 5
    budget.save()
    assert 'id="notice-held-for-budget"' not in page_of(root_client, task)
    budget.limit_usd = 1
    budget.save()
    alex.runtime = "external"  # its own program calls models: nothing the service holds back
    alex.save(update_fields=["runtime"])
    assert 'id="notice-held-for-budget"' not in page_of(root_client, task)
