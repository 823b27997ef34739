"""The roster's filters run in SQL (issue 10 §3): the same answers as the Python filters they
replaced, in a number of queries that does not grow with the organization."""

import random
from datetime import UTC, datetime

import pytest

from organization.models import Agent
from organization.roster import get_roster
from organization.workload import AVAILABLE_STATUSES, held_statuses, status_for
from tasks.models import Task, TaskStatus
from tests.factories import give_tasks, make_agent, make_org, make_team

pytestmark = pytest.mark.django_db

# Case variants, and terms whose str.casefold() SQL's lower() does not reproduce (ß → ss, the
# Kelvin sign → k, final sigma): ignore_case must still match exactly what casefold matches.
TERMS = [
    "PostgreSQL",
    "postgresql",
    "POSTGRESQL",
    "React",
    "Straße",
    "STRASSE",
    "ß",
    "SS",
    "\u212a",
    "K",
    "Σ",
    "ς",
    "σ",
    "Été",
    "ÉTÉ",
    'say "hi"',
    "back\\slash",
    "a,b",
]
STATUSES = list(TaskStatus.values)


@pytest.fixture
def varied_org(db):
    """An organization whose agents vary in everything the filters look at: team (or none),
    paused, capacity, workload (held and not held tasks), expertise, availability."""
    rng = random.Random(10)
    org = make_org()
    teams = [make_team(org, f"Team {n}") for n in range(3)]
    agents, tasks = [], []
    for n in range(40):
        agent = make_agent(
            org,
            f"agent-{n:02d}",
            role=f"Role {n % 4}",
            team=rng.choice([*teams, None]),
            senior=rng.choice([None, *agents[:5]]),
            expertise=rng.sample(TERMS, rng.randint(0, 4)),
            is_paused=rng.random() < 0.2,
            workload_capacity=rng.choice([0, 1, 3, 5, 5, 5, 10]),
            availability_until=rng.choice([None, datetime(2031, 5, 4, 12, 30, tzinfo=UTC)]),
        )
        agents.append(agent)
        tasks += [
            Task(
                organization=org,
                title=f"t{n}-{k}",
                status=rng.choice(STATUSES),
                assignee=agent,
                delegation_chain=[agent.handle],
            )
            for k in range(rng.randint(0, 7))
        ]
    Task.objects.bulk_create(tasks)
    return org


def expected_rows(org) -> dict[str, dict]:
    """Each agent as the roster shows it, from the rows and Python's status rule, plus the team
    id the old my_team filter compared."""
    held = set(held_statuses())
    rows = {}
    for agent in Agent.objects.filter(organization=org).select_related("team", "senior"):
        workload = sum(1 for t in agent.held_tasks.all() if t.status in held)
        rows[agent.handle] = {
            "id": agent.handle,
            "name": agent.name,
            "role": agent.role,
            "team": agent.team.name if agent.team else None,
            "seniorId": agent.senior.handle if agent.senior else None,
            "expertise": agent.expertise,
            "status": status_for(
                is_paused=agent.is_paused, workload=workload, capacity=agent.workload_capacity
            ),
            "current_workload": workload,
            "workload_capacity": agent.workload_capacity,
            "availability_until": agent.availability_until,
            "_team_id": agent.team_id,
        }
    return rows


def python_roster(rows, me, filter, expertise=None, expertise_match="exact") -> dict:
    """The roster as the previous implementation computed it: every row read, filtered here."""

    def keeps(row) -> bool:
        if filter == "my_team":
            return me["_team_id"] is not None and row["_team_id"] == me["_team_id"]
        if filter == "available":
            return row["status"] in AVAILABLE_STATUSES
        if filter == "by_expertise" and expertise_match == "ignore_case":
            return any(e.casefold() == expertise.casefold() for e in row["expertise"])
        if filter == "by_expertise":
            return expertise in row["expertise"]
        return True

    def public(row) -> dict:
        return {k: v for k, v in row.items() if not k.startswith("_")}

    colleagues = [
        public(row)
        for handle, row in sorted(rows.items())
        if (me is None or handle != me["id"]) and keeps(row)
    ]
    return {"agent_context": public(me) if me else None, "colleagues": colleagues}


def cases(rows):
    words = {term for row in rows.values() for term in row["expertise"]}
    words |= {w.upper() for w in words} | {w.lower() for w in words}
    words |= {w.casefold() for w in words} | {"SQL", "nobody knows this"}
    yield "all", None, "exact"
    yield "available", None, "exact"
    for word in sorted(words):
        yield "by_expertise", word, "exact"
        yield "by_expertise", word, "ignore_case"


def test_every_filter_answers_as_the_python_filters_did(varied_org):
    rows = expected_rows(varied_org)
    agents = {a.handle: a for a in Agent.objects.filter(organization=varied_org)}
    checked = 0
    for handle in [None, *sorted(rows)[::3]]:
        agent, me = (agents[handle], rows[handle]) if handle else (None, None)
        filters = list(cases(rows)) + ([("my_team", None, "exact")] if agent else [])
        for filter, expertise, match in filters:
            got = get_roster(
                org=varied_org,
                agent=agent,
                filter=filter,
                expertise=expertise,
                expertise_match=match,
            )
            assert got == python_roster(rows, me, filter, expertise, match), (
                handle,
                filter,
                expertise,
                match,
            )
            checked += 1
    assert checked > 500


def test_the_varied_organization_exercises_every_status_and_match(varied_org):
    """The comparison above is only as good as its data: every status occurs, ignore_case finds
    terms exact misses (ß and SS, the Kelvin sign and K), and some agents have no team."""
    rows = expected_rows(varied_org)
    assert {r["status"] for r in rows.values()} == {"idle", "active", "busy", "offline"}
    assert any(r["_team_id"] is None for r in rows.values())
    for wanted in ("ss", "k", "postgresql"):
        exact = get_roster(org=varied_org, agent=None, filter="by_expertise", expertise=wanted)
        folded = get_roster(
            org=varied_org,
            agent=None,
            filter="by_expertise",
            expertise=wanted,
            expertise_match="ignore_case",
        )
        assert len(folded["colleagues"]) > len(exact["colleagues"]), wanted


def test_the_requester_keeps_its_context_when_the_filter_leaves_it_out(db):
    org = make_org()
    me = make_agent(org, "agent-me", expertise=["Go"], is_paused=True)
    make_agent(org, "agent-pg", expertise=["PostgreSQL"])
    for filter, expertise in (("available", None), ("by_expertise", "PostgreSQL")):
        roster = get_roster(org=org, agent=me, filter=filter, expertise=expertise)
        assert roster["agent_context"]["id"] == "agent-me"
        assert roster["agent_context"]["status"] == "offline"
        assert [c["id"] for c in roster["colleagues"]] == ["agent-pg"]


def test_paused_agents_are_offline_and_never_available(db):
    org = make_org()
    me = make_agent(org, "agent-me")
    make_agent(org, "agent-paused", is_paused=True)
    give_tasks(make_agent(org, "agent-paused-busy", is_paused=True), 5)
    make_agent(org, "agent-idle")
    everyone = get_roster(org=org, agent=me)["colleagues"]
    assert {c["id"]: c["status"] for c in everyone} == {
        "agent-idle": "idle",
        "agent-paused": "offline",
        "agent-paused-busy": "offline",
    }
    available = get_roster(org=org, agent=me, filter="available")["colleagues"]
    assert [c["id"] for c in available] == ["agent-idle"]


# --- the number of queries does not grow with the organization ---------------------------

# (params, queries): the key lookup and the roster's one query; ignore_case first reads the
# organization's distinct terms.
QUERY_CASES = [
    ({"filter": "all"}, 2),
    ({"filter": "my_team"}, 2),
    ({"filter": "available"}, 2),
    ({"filter": "by_expertise", "expertise": "X"}, 2),
    ({"filter": "by_expertise", "expertise": "x", "expertise_match": "ignore_case"}, 3),
]


@pytest.mark.parametrize("params, queries", QUERY_CASES, ids=lambda p: str(p))
def test_each_filter_runs_in_constant_queries(
    db, agent_client, django_assert_max_num_queries, params, queries
):
    org = make_org()
    team = make_team(org)
    me = make_agent(org, team=team)
    client = agent_client(me)

    def roster():
        response = client.get("/api/roster", params)
        assert response.status_code == 200, response.content
        return response.json()["colleagues"]

    roster()  # the first call records the key's use
    with django_assert_max_num_queries(queries) as small:
        found_small = roster()
    for n in range(50):
        agent = make_agent(org, team=team, expertise=["X", f"term-{n}"])
        give_tasks(agent, n % 3)
    with django_assert_max_num_queries(queries) as large:
        found_large = roster()
    assert len(found_large) == len(found_small) + 50
    assert len(large.captured_queries) == len(small.captured_queries)
