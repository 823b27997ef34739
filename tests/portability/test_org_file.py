"""Issue 40 §2: the organization as a file — `export_org` and `import_org`."""

import io
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from jsonschema import Draft202012Validator

from costs.models import Budget
from organization.models import Agent, Organization, Team
from portability.document import schema
from routines.services import webhook_secret
from tasks.models import ApprovalPolicy, Task
from tests.factories import make_agent, make_key, make_org, make_team

from .conftest import export, import_file, rows_of, without_identity

pytestmark = pytest.mark.django_db


def test_the_export_is_an_agent_org_document_its_schema_accepts(settled_demo):
    document = export("demo")
    Draft202012Validator.check_schema(schema())
    assert list(Draft202012Validator(schema()).iter_errors(document)) == []
    assert (document["format"], document["version"]) == ("agent-org", 1)
    assert [t["name"] for t in document["teams"]] == [
        "Design",
        "Development",
        "Infrastructure",
        "Leadership",
    ]
    sarah = next(a for a in document["agents"] if a["id"] == "agent-sarah")
    assert sarah["team"] == "Development" and sarah["senior"] == "agent-alice"
    assert sarah["allowed_tools"] == ["get_task", "get_my_context"]
    assert sarah["runtime"] == "managed" and sarah["llm_provider"] == "offline"
    assert document["budgets"] == [
        {"scope": "agent", "agent": "agent-alex", "limit_usd": "25"},
        {"scope": "organization", "limit_usd": "500"},
        {"scope": "team", "team": "Development", "limit_usd": "120.5"},
    ]
    assert [(p["name"], p["cost_above_usd"]) for p in document["approval_policies"]] == [
        ("Costly sessions", "2.5"),
        ("Costly sessions", "10"),
        ("Critical work", None),
    ]
    assert document["team_rules"]["default_supervisor"] == "agent-alice"
    assert document["routines"] == [
        {
            "title": "Backups checked",
            "description": "",
            "required_expertise": "",
            "urgency": "normal",
            "team": None,
            "agent": "agent-database-lead",
            "cron": "",
            "timezone": "UTC",
            "interval_seconds": 3600,
            "concurrency": "queue",
            "catch_up": "run_once",
            "enabled": False,
        },
        {
            "title": "Weekly dependency review ({date})",
            "description": "",
            "required_expertise": "Node.js",
            "urgency": "normal",
            "team": "Development",
            "agent": None,
            "cron": "0 9 * * 1",
            "timezone": "Europe/Paris",
            "interval_seconds": None,
            "concurrency": "skip",
            "catch_up": "skip",
            "enabled": True,
        },
    ]


def test_the_export_carries_no_secret_and_no_database_id(settled_demo, tmp_path):
    alex = settled_demo.agents.get(handle="agent-alex")
    keys = [make_key(settled_demo), make_key(settled_demo, alex)]
    call_command("export_org", "demo", "--out", str(tmp_path / "demo.json"))
    text = (tmp_path / "demo.json").read_text()
    routines = list(settled_demo.routines.all())
    for secret in [
        settled_demo.webhook_secret,
        *keys,
        *alex.api_keys.values_list("digest", flat=True),
        *(webhook_secret(routine) for routine in routines),
        *(routine.webhook_nonce for routine in routines),
    ]:
        assert secret not in text
    for prefix in settled_demo.api_keys.values_list("prefix", flat=True):
        assert prefix not in text

    def keys_of(value):
        if isinstance(value, dict):
            return set(value) | {k for v in value.values() for k in keys_of(v)}
        if isinstance(value, list):
            return {k for v in value for k in keys_of(v)}
        return set()

    names = keys_of(json.loads(text))
    assert not names & {
        "pk",
        "webhook_secret",
        "webhook_nonce",
        "api_keys",
        "digest",
        "prefix",
        "organization_id",
    }


def test_the_demo_round_trips_under_a_new_slug(settled_demo, tmp_path):
    """Export, import as another organization, export again: the same but slug and time."""
    first = export("demo")
    demo_rows = rows_of(settled_demo)
    out = import_file(tmp_path, first, "--as", "demo-copy")
    assert "create organization demo-copy" in out
    assert "create agent agent-sarah" in out

    second = export("demo-copy")
    assert second["organization"]["slug"] == "demo-copy"
    assert without_identity(second) == without_identity(first)
    # The settings only: none of the demo's work came along, and the demo is untouched.
    copy = Organization.objects.get(slug="demo-copy")
    assert not Task.objects.filter(organization=copy).exists()
    assert not copy.api_keys.exists()
    assert copy.webhook_secret != settled_demo.webhook_secret
    assert copy.has_approval_policies is True
    # Set by the command: the budgets say so, as the history does.
    assert set(Budget.objects.filter(organization=copy).values_list("created_by", flat=True)) == {
        "system"
    }
    assert rows_of(settled_demo) == demo_rows
    # Importing the same file again changes nothing.
    again = import_file(tmp_path, first, "--as", "demo-copy")
    assert again.splitlines() == [
        f"demo-copy: 0 item(s) were created, 0 changed, {_items(first)} unchanged."
    ]


def _items(document: dict) -> int:
    return sum(
        1 if isinstance(v, dict) else len(v)
        for k, v in document.items()
        if k not in ("format", "version", "exported_at", "organization")
    )


def test_an_import_into_the_organization_updates_what_the_file_changed(settled_demo, tmp_path):
    document = export("demo")
    alex = next(a for a in document["agents"] if a["id"] == "agent-alex")
    alex.update(workload_capacity=3, team="Design", senior="agent-sam", llm_model="gpt-x")
    document["teams"].append({"name": "Research"})
    document["team_rules"]["stale_after_seconds"]["high"] = 600
    document["budgets"][1]["limit_usd"] = "750.00"

    out = import_file(tmp_path, document)

    assert out.splitlines() == [
        "create team Research",
        'update agent agent-alex: team: "Development" → "Design", senior: "agent-alice" → '
        '"agent-sam", workload_capacity: 5 → 3, llm_model: "" → "gpt-x"',
        "update team rules: stale_after_seconds: "
        '{"critical": 900, "high": 3600, "normal": 14400, "low": 86400} → '
        '{"critical": 900, "high": 600, "normal": 14400, "low": 86400}',
        'update budget organization: limit_usd: "500" → "750"',
        f"demo: 1 item(s) were created, 3 changed, {_items(document) - 4} unchanged.",
    ]
    alex = Agent.objects.get(organization=settled_demo, handle="agent-alex")
    assert (alex.workload_capacity, alex.team.name, alex.senior.handle, alex.llm_model) == (
        3,
        "Design",
        "agent-sam",
        "gpt-x",
    )
    assert settled_demo.team_rule.stale_after_high.total_seconds() == 600
    assert str(Budget.objects.get(organization=settled_demo, scope="organization").limit_usd) == (
        "750.000000000"
    )
    # Who changed it: the agent's history has the import's change, by the system.
    last = alex.history.order_by("-history_id").first()
    assert (last.workload_capacity, last.history_actor_kind) == (3, "system")


def test_a_dry_run_prints_the_changes_and_writes_nothing(settled_demo, tmp_path):
    document = export("demo")
    next(a for a in document["agents"] if a["id"] == "agent-alex")["paused"] = True
    document["agents"].append({"id": "agent-new", "name": "New", "team": "Research"})
    document["teams"].append({"name": "Research"})
    before = rows_of(settled_demo)

    out = import_file(tmp_path, document, "--dry-run")

    assert "create team Research" in out
    assert "create agent agent-new" in out
    assert "update agent agent-alex: paused: false → true" in out
    assert out.splitlines()[-1].endswith("Dry run: nothing was written.")
    assert rows_of(settled_demo) == before
    assert not Agent.objects.filter(handle="agent-new").exists()


def test_a_dry_run_of_a_new_organization_creates_none(settled_demo, tmp_path):
    out = import_file(tmp_path, export("demo"), "--as", "elsewhere", "--dry-run")
    assert "create organization elsewhere" in out
    assert not Organization.objects.filter(slug="elsewhere").exists()


@pytest.mark.parametrize(
    "spoil, refusal",
    [
        (
            lambda d: d.update(format="paperclip"),
            "Not an agent-org file: its \"format\" is 'paperclip'.",
        ),
        (
            lambda d: d.update(version=2),
            "Version 2 of the agent-org format is not read here: this install reads version 1.",
        ),
        (
            lambda d: d["agents"][2].update(team="Marketing"),
            "agents[2] (agent-database-lead): team: Team not found: Marketing",
        ),
        (
            lambda d: d["agents"][1].update(workload_capacity=-1),
            "agents[1] (agent-alice).workload_capacity: -1 is less than the minimum of 0",
        ),
        (
            lambda d: d["agents"][0].update(webhook_url="http://127.0.0.1/hook"),
            "agents[0] (agent-alex): webhook_url: Webhook URLs must be http(s) and point to a "
            "public address",
        ),
        (
            lambda d: d["agents"][0].update(runtime="robot"),
            "agents[0] (agent-alex): runtime: Value 'robot' is not a valid choice.",
        ),
        (
            lambda d: d["agents"][0].update(allowed_tools=["fly"]),
            "agents[0] (agent-alex): allowed_tools: Unknown tool(s): fly.",
        ),
        (
            lambda d: d["agents"][1].update(senior="agent-sarah"),
            "agents[1] (agent-alice): senior: agent-sarah would close a cycle",
        ),
        (
            lambda d: (
                d["agents"][0].update(senior="agent-taylor"),
                d["agents"][6].update(senior="agent-alex"),
            ),
            "agents[0] (agent-alex): senior: agent-taylor would close a cycle",
        ),
        (
            lambda d: d["hierarchy_roles"].append({"agent": "agent-nobody", "role": "worker"}),
            "hierarchy_roles[7] (agent-nobody): Agent not found in workspace",
        ),
        (
            lambda d: d["team_rules"].update(default_supervisor="agent-sarah"),
            "team_rules: Agent must have supervisor role to be default supervisor",
        ),
        (
            lambda d: d["budgets"].append({"scope": "team", "team": "Nope", "limit_usd": "1"}),
            "budgets[3] (team Nope): Team not found: Nope",
        ),
        (
            lambda d: d["budgets"].append(
                {"scope": "organization", "team": "Design", "limit_usd": "1"}
            ),
            "budgets[3].team: 'Design' is not of type 'null'",
        ),
        (
            lambda d: d["approval_policies"].append(
                {"name": "T", "trigger": "tool", "tools": ["fly"]}
            ),
            "approval_policies[3] (T): tools: Unknown tool: fly.",
        ),
        (
            lambda d: d["approval_policies"][2].update(deciders=["nobody"]),
            "approval_policies[2] (Critical work): deciders: nobody is no member of the organization.",
        ),
        (
            lambda d: d["teams"].append({"name": "Design"}),
            "teams[4] (Design): listed twice.",
        ),
        (
            lambda d: d["routines"].append({"title": "Weekly review", "cron": "0 9 * *"}),
            "routines[2] (Weekly review): Give the owner: either team (its name) or agent",
        ),
        (
            lambda d: d.update(extra=1),
            "the file: Additional properties are not allowed ('extra' was unexpected)",
        ),
    ],
)
def test_a_bad_file_is_refused_naming_the_item_and_nothing_is_written(
    settled_demo, tmp_path, spoil, refusal
):
    """Each refusal comes after the earlier sections were applied (a new agent, a changed
    one): the whole import rolls back."""
    document = export("demo")
    document["agents"].insert(0, {"id": "agent-alex", "name": "Alex", "workload_capacity": 4})
    del document["agents"][1]  # agent-alex, moved first and changed
    document["agents"].append({"id": "agent-zed", "name": "Zed", "team": "Design"})
    document["agents"].sort(key=lambda a: a["id"] != "agent-alex")
    spoil(document)
    before = rows_of(settled_demo)
    organizations = Organization.objects.count()

    with pytest.raises(CommandError) as refused:
        import_file(tmp_path, document)

    assert str(refused.value).startswith(refusal), str(refused.value)
    assert rows_of(settled_demo) == before
    assert Organization.objects.count() == organizations


def test_a_refused_new_organization_is_not_created(settled_demo, tmp_path):
    document = export("demo")
    document["budgets"].append({"scope": "agent", "agent": "agent-nobody", "limit_usd": "1"})
    with pytest.raises(CommandError, match=r"budgets\[3\] \(agent agent-nobody\): Agent not found"):
        import_file(tmp_path, document, "--as", "fresh")
    assert not Organization.objects.filter(slug="fresh").exists()
    assert not Team.objects.filter(organization__slug="fresh").exists()


def test_a_file_that_is_no_json_or_a_slug_that_is_no_slug_is_refused(db, tmp_path):
    path = tmp_path / "org.json"
    path.write_text("{not json")
    with pytest.raises(CommandError, match="The file is not JSON"):
        call_command("import_org", str(path))
    minimal = {"format": "agent-org", "version": 1, "organization": {"slug": "ok"}}
    with pytest.raises(CommandError, match="organization: slug: Enter a valid “slug”"):
        import_file(tmp_path, minimal, "--as", "../etc")
    assert not Organization.objects.exists()
    with pytest.raises(CommandError, match="Organization not found: nowhere"):
        call_command("export_org", "nowhere")


def test_an_import_touches_no_other_organizations_rows(settled_demo, tmp_path):
    """Another organization with the same team names and agent ids keeps every row."""
    other = make_org("other")
    design = make_team(other, "Design")
    make_agent(other, "agent-alex", name="Other Alex", team=design, workload_capacity=9)
    make_agent(other, "agent-sam", name="Other Sam")
    make_key(other)
    other_rows = rows_of(other)
    document = export("demo")
    for agent in document["agents"]:
        agent["workload_capacity"] = 2
    document["budgets"][1]["limit_usd"] = "1"

    import_file(tmp_path, document)
    import_file(tmp_path, document, "--as", "third")

    assert rows_of(other) == other_rows
    assert set(
        Agent.objects.filter(workload_capacity=2).values_list("organization__slug", flat=True)
    ) == {
        "demo",
        "third",
    }
    assert ApprovalPolicy.objects.filter(organization=other).count() == 0


def test_an_import_adds_and_changes_but_never_removes(settled_demo, tmp_path):
    document = {
        "format": "agent-org",
        "version": 1,
        "organization": {"slug": "demo"},
        "agents": [{"id": "agent-taylor", "paused": True}],
    }
    agents = set(settled_demo.agents.values_list("handle", flat=True))
    out = import_file(tmp_path, document)
    assert out.splitlines()[0] == "update agent agent-taylor: paused: false → true"
    assert set(settled_demo.agents.values_list("handle", flat=True)) == agents
    assert Budget.objects.filter(organization=settled_demo).count() == 3
    assert settled_demo.agents.get(handle="agent-taylor").is_paused


def test_a_resumed_agent_takes_its_queued_work_as_in_the_admin(demo, tmp_path):
    """Resuming an agent by file is resuming it: the queue rule runs (rule 5)."""
    morgan = demo.agents.get(handle="agent-database-lead")
    queued = Task.objects.get(organization=demo, status="queued", queued_for=morgan)
    document = export("demo")
    next(a for a in document["agents"] if a["id"] == "agent-database-lead")["workload_capacity"] = 6
    import_file(tmp_path, document)
    queued.refresh_from_db()
    assert (queued.status, queued.assignee_id) == ("assigned", morgan.pk)


def test_reporting_lines_the_file_swaps_are_judged_as_they_end(demo, tmp_path):
    """Sam leads Jordan; the file has Jordan lead Sam, Sam listed first: no cycle once done."""
    document = {
        "format": "agent-org",
        "version": 1,
        "organization": {"slug": "demo"},
        "agents": [
            {"id": "agent-sam", "senior": "agent-jordan"},
            {"id": "agent-jordan", "senior": "agent-alice"},
        ],
    }
    import_file(tmp_path, document)
    seniors = dict(demo.agents.values_list("handle", "senior__handle"))
    assert (seniors["agent-sam"], seniors["agent-jordan"]) == ("agent-jordan", "agent-alice")


@pytest.mark.django_db(transaction=True)
def test_the_seeded_demo_with_its_managed_agents_round_trips(tmp_path):
    """`seed_demo` as `make run` plays it (managed agents on the offline provider, their work
    done): its file imports as another organization and exports the same again."""
    call_command("seed_demo", stdout=StringIO())
    first = export("demo")
    assert {a["id"] for a in first["agents"] if a["runtime"] == "managed"} == {
        "agent-alice",
        "agent-sarah",
        "agent-alex",
        "agent-taylor",
    }
    import_file(tmp_path, first, "--as", "demo-copy")
    assert without_identity(export("demo-copy")) == without_identity(first)
    assert not Task.objects.filter(organization__slug="demo-copy").exists()


def test_the_commands_read_stdin_and_refuse_a_directory_to_write(demo, tmp_path, monkeypatch):
    with pytest.raises(CommandError, match="is a directory: --out takes the file to write"):
        call_command("export_org", "demo", "--out", str(tmp_path))
    document = export("demo")
    document["agents"][0]["name"] = "Alexander"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(document).encode())))
    out = StringIO()
    call_command("import_org", "-", stdout=out)
    assert out.getvalue().startswith('update agent agent-alex: name: "Alex" → "Alexander"')


def test_an_imported_routine_is_on_the_beat_with_a_secret_of_its_own(settled_demo, tmp_path):
    from django_celery_beat.models import PeriodicTask

    from routines.models import Routine

    import_file(tmp_path, export("demo"), "--as", "demo-copy")
    copied = Routine.objects.get(organization__slug="demo-copy", title__startswith="Weekly")
    original = Routine.objects.get(organization=settled_demo, title__startswith="Weekly")
    assert copied.team.organization.slug == "demo-copy"
    assert PeriodicTask.objects.get(name=f"Routine {copied.pk}").crontab.day_of_week == "1"
    assert webhook_secret(copied) != webhook_secret(original)


def test_an_import_changes_a_routine_it_matches_by_title(settled_demo, tmp_path):
    document = export("demo")
    weekly = next(r for r in document["routines"] if r["title"].startswith("Weekly"))
    weekly.update(cron="30 8 * * 1", concurrency="allow")
    out = import_file(tmp_path, document)
    assert out.splitlines()[0] == (
        'update routine Weekly dependency review ({date}): cron: "0 9 * * 1" → "30 8 * * 1", '
        'concurrency: "skip" → "allow"'
    )
    routine = settled_demo.routines.get(title__startswith="Weekly")
    assert (routine.cron, routine.concurrency, routine.team.name) == (
        "30 8 * * 1",
        "allow",
        "Development",
    )


def test_a_file_holding_what_the_database_cannot_store_is_refused(settled_demo, tmp_path):
    """A NUL character or a lone surrogate in any text of the file: refused naming where, as
    the API refuses such input, never a database error."""
    before = rows_of(settled_demo)
    document = export("demo")
    document["teams"].append({"name": "Design\x00"})
    with pytest.raises(CommandError) as refused:
        import_file(tmp_path, document)
    assert (
        str(refused.value) == f"teams[{len(document['teams']) - 1}].name: contains a NUL character."
    )
    document = export("demo")
    document["agents"][0]["system_prompt"] = "\ud800"
    with pytest.raises(CommandError) as refused:
        import_file(tmp_path, document)
    assert str(refused.value) == "agents[0].system_prompt: contains a lone surrogate."
    assert rows_of(settled_demo) == before
