"""Helpers of the organization-file tests: run the commands, read every row of an organization."""

import json
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command

from costs.budgets import budget_set
from organization.caller import Caller
from organization.hierarchy import rules_set
from organization.models import Organization
from routines.services import routine_create
from tasks import services as task_services


def export(slug: str) -> dict:
    out = StringIO()
    call_command("export_org", slug, stdout=out)
    return json.loads(out.getvalue())


def import_file(tmp_path, document: dict, *args) -> str:
    """`import_org` of `document` written to a file; its output."""
    path = tmp_path / "org.json"
    path.write_text(json.dumps(document))
    out = StringIO()
    call_command("import_org", str(path), *args, stdout=out)
    return out.getvalue()


def without_identity(document: dict) -> dict:
    """The document but what differs between two organizations of the same settings."""
    document = json.loads(json.dumps(document))
    del document["exported_at"], document["organization"]["slug"]
    return document


def rows_of(org: Organization) -> dict:
    """Every row of every model that belongs to `org` (by its organization or its agent), every
    column but the historical rows' own: a change anywhere in it shows."""
    rows = {}
    for model in apps.get_models():
        names = {f.name for f in model._meta.concrete_fields}
        if model is Organization:
            found = model.objects.filter(pk=org.pk)
        elif "organization" in names:
            found = model._default_manager.filter(organization=org)
        elif "agent" in names and model._meta.get_field("agent").related_model._meta.label == (
            "organization.Agent"
        ):
            found = model._default_manager.filter(agent__organization=org)
        else:
            continue
        rows[model._meta.label] = list(found.order_by("pk").values())
    return rows


@pytest.fixture
def settled_demo(demo):
    """The demo with what it lacks of the file's kinds: budgets, approval policies, team rules
    that are not the defaults, a managed agent's allow-list, and routines."""
    human = Caller(organization=demo)
    routine_create(
        organization=demo,
        title="Weekly dependency review ({date})",
        team="Development",
        required_expertise="Node.js",
        cron="0 9 * * 1",
        timezone="Europe/Paris",
    )
    routine_create(
        organization=demo,
        title="Backups checked",
        agent="agent-database-lead",
        interval_seconds=3600,
        concurrency="queue",
        catch_up="run_once",
        enabled=False,
    )
    budget_set(caller=human, scope="organization", limit_usd="500")
    budget_set(caller=human, scope="team", team="Development", limit_usd="120.50")
    budget_set(caller=human, scope="agent", agent="agent-alex", limit_usd="25")
    task_services.policy_create(
        org=demo, name="Critical work", trigger="urgency", urgencies=["critical"]
    )
    task_services.policy_create(
        org=demo, name="Costly sessions", trigger="collaboration_cost", cost_above_usd="2.5"
    )
    task_services.policy_create(
        org=demo,
        name="Costly sessions",
        trigger="collaboration_cost",
        cost_above_usd="10",
        scope="team",
        team=demo.teams.get(name="Infrastructure"),
        enabled=False,
    )
    rules_set(
        caller=human,
        data={"require_supervisor_for_tasks": True, "default_supervisor_agent_id": "agent-alice"},
    )
    demo.agents.filter(handle="agent-sarah").update(
        allowed_tools=["get_task", "get_my_context"],
        system_prompt="Ship small.",
        runtime="managed",
        llm_provider="offline",
        llm_temperature=0.2,
    )
    return demo
