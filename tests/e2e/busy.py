"""An organization after a week of real use, for the lists' width checks: runs on tasks with long
titles, model calls of long model names (priced and unpriced, self-reported), named keys, agents
of long names and many skills — what the demo alone leaves empty."""

from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from collaboration.models import CollaborationSession
from costs.metering import current_period
from costs.models import Budget, PriceSource, UsagePurpose, UsageRecord, UsageState
from organization.services import api_key_create
from runtime.models import ACTIVE_STATUSES, Run, RunStatus, RunTrigger, RunTurn
from tasks.models import DeliveryStatus, Task, TaskStatus, WebhookDelivery
from tests.console.data import a_vote

LONG_TITLE = (
    "Migrate the customer-facing authentication service to the new identity provider "
    "(OpenID Connect) without downtime"
)
MODELS = [
    ("openrouter", "anthropic/claude-3-5-sonnet-20241022"),
    ("openai", "gpt-4o-mini-2024-07-18"),
    ("anthropic", "claude-sonnet-4-5-20250929"),
]

# A run's conversation: the model's words, a call answered, a call refused.
TURNS = [
    {
        "kind": "model",
        "text": "I will check the task first.",
        "prompt_tokens": 900,
        "completion_tokens": 40,
        "tool_calls": [{"id": "c1", "name": "get_task"}],
    },
    {
        "kind": "tool_call",
        "id": "c1",
        "name": "get_task",
        "arguments": {"task_id": 1},
        "status": "ok",
        "result": {
            "id": 1,
            "status": "in_progress",
            "subtasks": [{"id": n, "status": "completed"} for n in range(12)],
        },
    },
    {
        "kind": "tool_call",
        "id": "c2",
        "name": "complete_task",
        "arguments": {"task_id": 1},
        "status": "error",
        "error": {"success": False, "error": "It has open subtasks.", "code": "open_subtasks"},
    },
]


def make_busy(org) -> None:
    agents = list(org.agents.order_by("handle"))
    first = agents[0]
    first.name = "Maximilian Alexander Featherstonehaugh-Whitfield"
    first.role = "Principal Site Reliability Engineer and Incident Commander"
    first.expertise = [
        "Kubernetes",
        "PostgreSQL",
        "Terraform",
        "AWS",
        "Incident response",
        "Observability (OpenTelemetry)",
        "Capacity planning",
        "Disaster recovery",
    ]
    first.save()
    now = timezone.now()
    triggers = ["subtasks_done", "auto_assigned", "delegated", "comment", "resumed"]
    statuses = [RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.RUNNING, RunStatus.QUEUED]
    for i, agent in enumerate(agents):
        task = Task.objects.create(
            organization=org,
            title=f"{LONG_TITLE} #{i}",
            status=TaskStatus.IN_PROGRESS,
            assignee=agent,
            delegation_chain=[agent.handle],
        )
        # One active run per agent at most: the active ones go to the first agents only.
        status = statuses[i % 2] if i >= 2 else statuses[2 + i]
        run = Run.objects.create(
            organization=org,
            agent=agent,
            task=task,
            trigger=triggers[i % len(triggers)],
            status=status,
            provider=MODELS[i % 3][0],
            model=MODELS[i % 3][1],
            prompt_tokens=123_456,
            completion_tokens=7_890,
            attempts=2,
            started_at=now - timedelta(minutes=40),
            finished_at=None if status in ACTIVE_STATUSES else now - timedelta(minutes=3),
        )
        RunTrigger.objects.create(
            organization=org, agent=agent, run=run, task=task, trigger=run.trigger
        )
        for index, turn in enumerate(TURNS):
            RunTurn.objects.create(run=run, index=index, data={"index": index, **turn})
        for j, (provider, model) in enumerate(MODELS):
            UsageRecord.objects.create(
                organization=org,
                agent=agent,
                team=agent.team,
                task=task,
                run=run,
                purpose=[UsagePurpose.RUN, UsagePurpose.REPORTED, UsagePurpose.COLLABORATION][j],
                provider=provider,
                model=model,
                prompt_tokens=1_234_567,
                completion_tokens=98_765,
                cost_usd=None if j == 1 else Decimal("12.3456789"),
                price_source=PriceSource.UNKNOWN if j == 1 else PriceSource.GENAI_PRICES,
                self_reported=j == 1,
                state=[UsageState.RECORDED, UsageState.RESERVED, UsageState.EXPIRED][j],
            )
        api_key_create(
            organization=org, agent=agent, name=f"{agent.name}'s laptop (Claude Desktop, MCP)"
        )
    api_key_create(organization=org, name="Continuous deployment pipeline — production")
    WebhookDelivery.objects.create(
        organization=org,
        agent=first,
        status=DeliveryStatus.FAILED,
        attempts=8,
        url="https://hooks.internal.example.com/agent-org/notifications/v2/agent-alex/deliveries",
        response_status=503,
        last_error="HTTPSConnectionPool: Read timed out. (read timeout=5)",
    )
    period = current_period()
    Budget.objects.create(
        organization=org,
        scope="organization",
        limit_usd=Decimal("1500"),
        spent_usd=Decimal("1234.5678"),
        period=period,
    )
    Budget.objects.create(
        organization=org,
        scope="agent",
        agent=first,
        limit_usd=Decimal("25"),
        spent_usd=Decimal("25"),
        period=period,
    )
    if first.team_id:
        Budget.objects.create(
            organization=org,
            scope="team",
            team=first.team,
            limit_usd=Decimal("400"),
            spent_usd=Decimal("390.12"),
            period=period,
        )
    CollaborationSession.objects.filter(pk=a_vote(org).pk).update(task=LONG_TITLE)
