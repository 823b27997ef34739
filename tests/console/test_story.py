"""A task told as a story (console/story.py): its timeline without raw JSON, the latest events and
comments of a long one, and what its tree cost."""

from django.urls import reverse

from tasks.demo import ESCALATED
from tasks.models import EventKind, Task, TaskComment, TaskEvent
from tests.console.data import usage_record
from tests.console.pages import page_of


def test_a_task_reads_as_a_story_without_raw_json(root_client, demo):
    task = Task.objects.get(organization=demo, title="Set up a staging cluster")
    html = page_of(root_client, task)
    timeline = html.split('id="timeline"')[1].split("</ol>")[0]
    assert "delegated the task to agent-jordan" in timeline
    assert "Fallback:</strong> Sam (Infrastructure Lead) when back." in timeline
    assert "Busy but has room (4/5)" in timeline
    assert "Note:</strong> Down my reporting line: Jordan reports to Sam" in timeline
    # Alice's delegation down her reporting line is not cross-team, whatever the teams.
    assert "Cross-team" not in timeline
    assert "&quot;status&quot;" not in html and '{"status"' not in html  # no event snapshot
    assert "Passed through" in html


def test_a_task_page_shows_what_its_tree_cost(root_client, demo):
    from costs.models import UsageRecord

    task = Task.objects.get(organization=demo, title="Set up a staging cluster")
    sub = Task.objects.create(organization=demo, title="sub", parent=task)
    UsageRecord.objects.bulk_create(
        usage_record(demo, cost, task=t) for t, cost in ((task, "0.5"), (sub, "0.25"))
    )
    html = page_of(root_client, task)
    assert html.split('id="task-cost">')[1].startswith("$0.7500")


def test_a_long_task_page_tells_its_latest_events_and_comments_and_links_the_rest(
    root_client, demo, django_assert_max_num_queries
):
    """An agent in a loop can write thousands of events and comments on one task: its page
    tells the latest (in order) and says where the rest are, in the same queries."""
    from console.story import COMMENTS_SHOWN, MOMENTS_SHOWN

    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    escalated_by = task.events.order_by("-pk").first()
    extra = MOMENTS_SHOWN + 50
    TaskEvent.objects.bulk_create(
        TaskEvent(
            organization=demo,
            task=task,
            kind=EventKind.COMMENT,
            actor_kind="agent",
            actor_label="agent-jordan",
            message=f"Note {i:04d}.",
        )
        for i in range(extra)
    )
    TaskComment.objects.bulk_create(
        TaskComment(organization=demo, task=task, author_label="agent-jordan", body=f"Ping {i:04d}")
        for i in range(COMMENTS_SHOWN + 30)
    )
    events_total = task.events.count()

    url = reverse("admin:tasks_task_change", args=[task.pk])
    root_client.get(url)
    with django_assert_max_num_queries(40):
        html = root_client.get(url).content.decode()
    timeline = html.split('id="timeline"')[1].split("</ol>")[0]
    assert timeline.count('class="moment ') == MOMENTS_SHOWN
    assert f"Note {extra - 1:04d}." in timeline and f"Note {extra - MOMENTS_SHOWN:04d}." in timeline
    assert f"Note {extra - MOMENTS_SHOWN - 1:04d}." not in timeline
    assert timeline.index("Note 0100.") < timeline.index("Note 0101.")  # oldest first
    assert f"The latest {MOMENTS_SHOWN} of its {events_total} events" in html
    assert f"/admin/tasks/taskevent/?task__id__exact={task.pk}" in html
    comments = html.split('id="comments"')[1].split("</div>\n\n")[0]
    assert comments.count('class="comment"') == COMMENTS_SHOWN
    assert f"Ping {COMMENTS_SHOWN + 29:04d}" in comments and "Ping 0029<" not in comments
    assert f"The latest {COMMENTS_SHOWN} of its {COMMENTS_SHOWN + 30} comments" in html
    # The banner still says who escalated it and why, though that event is no longer shown.
    banner = html.split('id="attention-banner"')[1].split("</section>")[0]
    assert escalated_by.actor_label in banner
    assert ESCALATED[3].replace("'", "&#x27;") in banner


def test_a_short_task_page_tells_every_event_with_no_cut(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    html = page_of(root_client, task)
    assert 'id="timeline-cut"' not in html and 'id="comments-cut"' not in html
