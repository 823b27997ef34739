"""Benchmark: the pages and calls a manager and the agents use, for a big organization against a
small one (issue 36 §6).

An organization of 100 agents, 10,000 tasks and 100,000 task events is built and measured
alone; then one of 10,000 agents, 1,000,000 tasks and 10,000,000 events is added to the same
database and measured. The rows go in by `INSERT … SELECT generate_series` (the API would take
days); both organizations have the same shape per agent (100 tasks, 2.5 % held, 1 % queued, ten
events and one inbox item per task, 20 stale queued tasks). Each page or call runs through
Django's test client (the sweep in process, rolled back), once warm, then `--runs` times; the
median is kept, and the SQL statements of one run are counted.

Targets: the slowest page's big ÷ small median <= 2 (`growth_ratio_max`), and every page runs
as many statements for both (`queries_growth`, the largest difference).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
        python bench/bigorg.py
    make bench
"""

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import EXPERTISE, bench_database, p50, redis_cleanup  # noqa: E402

SMALL = {"agents": 100, "tasks": 10_000, "events_per_task": 10}
BIG = {"agents": 10_000, "tasks": 1_000_000, "events_per_task": 10}
# Queued tasks past their threshold, in each organization: the sweep's work, the same for both.
STALE = 20
TARGET_GROWTH = 2.0
# A word a few titles carry (one task in 500), for the tasks list's search.
SEARCHED = "invoice"


def build(slug: str, *, agents: int, tasks: int, events_per_task: int) -> dict:
    """An organization of `agents` agents (20 teams, a tree ten wide), `tasks` tasks spread over
    the last year, `events_per_task` audit rows and one inbox item each; its pages' ids."""
    import random

    from django.contrib.auth import get_user_model
    from django.db import connection

    from organization.models import Agent, Organization, Team
    from organization.services import api_key_create

    rng = random.Random(agents)
    org = Organization.objects.create(slug=slug, name=slug.title())
    teams = Team.objects.bulk_create(
        Team(organization=org, name=f"Team {n:02d}") for n in range(20)
    )
    made = Agent.objects.bulk_create(
        [
            Agent(
                organization=org,
                handle=f"agent-{n:05d}",
                name=f"Agent {n}",
                role="Engineer",
                team=teams[n % 20],
                expertise=rng.sample(EXPERTISE, 3),
                is_paused=n % 20 == 19,
            )
            for n in range(agents)
        ],
        batch_size=2000,
    )
    for n, agent in enumerate(made[1:], start=1):
        agent.senior = made[(n - 1) // 10]
    Agent.objects.bulk_update(made[1:], ["senior"], batch_size=2000)
    first, last = made[0].pk, made[-1].pk
    with connection.cursor() as cursor:
        # The rows are consistent by construction: no foreign-key trigger checks them (deferred
        # to the commit, 50 million checks would take longer than the inserts).
        cursor.execute("SET session_replication_role = replica")
        # Task n belongs to agent n mod agents; its fate is a hash of n: 2.5 % held, 1 % queued
        # (not stale: a few minutes ago), 0.2 % escalated, the rest finished. One in 500 titles
        # carries the searched word.
        cursor.execute(
            f"""
            INSERT INTO tasks_task (organization_id, title, description, required_expertise,
                urgency, urgency_rank, status, assignee_id, queued_for_id, created_by_agent_id,
                delegation_chain, queued_at, queued_by_id, assigned_at, finished_at, result,
                created_at, updated_at)
            SELECT %(org)s, CASE WHEN n %% 500 = 7 THEN 'Pay the {SEARCHED} ' || n
                                 ELSE 'Task ' || n || ' of the quarter' END,
                   'What to do for task ' || n, e.expertise,
                   CASE WHEN f.fate BETWEEN 25 AND 34 THEN 'normal'
                        ELSE (ARRAY['low','normal','high','critical'])[1 + n %% 4] END,
                   CASE WHEN f.fate BETWEEN 25 AND 34 THEN 2 ELSE 1 + n %% 4 END,
                   s.status,
                   CASE WHEN s.status IN ('queued', 'escalated') THEN NULL ELSE a.id END,
                   CASE WHEN s.status = 'queued' THEN a.id END,
                   c.id,
                   CASE WHEN s.status IN ('queued', 'escalated') THEN jsonb_build_array(c.handle)
                        ELSE jsonb_build_array(c.handle, a.handle) END,
                   CASE WHEN s.status = 'queued'
                        THEN now() - make_interval(secs => n %% 600) END,
                   CASE WHEN s.status = 'queued' THEN c.id END,
                   CASE WHEN s.status NOT IN ('queued', 'escalated') THEN t.created END,
                   CASE WHEN s.status IN ('completed', 'failed', 'cancelled')
                        THEN t.created + interval '2 hours' END,
                   '', t.created, t.created
            FROM generate_series(1, %(tasks)s) AS n
            CROSS JOIN LATERAL (SELECT abs(hashint4(n)) %% 1000 AS fate) AS f
            CROSS JOIN LATERAL (SELECT CASE
                WHEN f.fate < 9 THEN 'assigned' WHEN f.fate < 18 THEN 'in_progress'
                WHEN f.fate < 25 THEN 'blocked' WHEN f.fate < 35 THEN 'queued'
                WHEN f.fate < 37 THEN 'escalated' WHEN f.fate < 60 THEN 'failed'
                WHEN f.fate < 80 THEN 'cancelled' ELSE 'completed' END AS status) AS s
            CROSS JOIN LATERAL (SELECT now() - make_interval(
                secs => (%(tasks)s - n) * 31536000.0 / %(tasks)s + 600) AS created) AS t
            JOIN organization_agent a ON a.id = %(first)s + n %% %(agents)s
            JOIN organization_agent c ON c.id = %(first)s + (n / 7 + 3) %% %(agents)s
            CROSS JOIN LATERAL (SELECT a.expertise ->> 0 AS expertise) AS e
            """,
            {"org": org.pk, "tasks": tasks, "agents": agents, "first": first},
        )
        assert last - first + 1 == agents
        # The stale ones: queued two days ago for a worker, by its senior.
        cursor.execute(
            """
            UPDATE tasks_task SET queued_at = now() - interval '2 days'
            WHERE id IN (SELECT id FROM tasks_task WHERE organization_id = %s AND status = 'queued'
                         ORDER BY id LIMIT %s)
            """,
            [org.pk, STALE],
        )
        # The audit trail: created, then moves; the last leaves the task as it is now.
        cursor.execute(
            """
            INSERT INTO tasks_taskevent (organization_id, task_id, kind, actor_kind,
                actor_agent_id, actor_label, recipient_id, before, after, message, decision,
                primary_choice, primary_reason, fallback, reasoning, notes, cross_team,
                coordination_note, created_at)
            SELECT t.organization_id, t.id,
                   (ARRAY['created','assigned','status_changed','comment','delegated',
                          'comment','status_changed','comment','comment','status_changed'])[k],
                   'agent', t.created_by_agent_id, 'agent', t.assignee_id,
                   '{}'::jsonb,
                   CASE WHEN k = %(last)s
                        THEN jsonb_build_object('status', t.status, 'assignee', t.assignee_id)
                        ELSE jsonb_build_object('status', 'in_progress',
                                                'assignee', t.created_by_agent_id) END,
                   '', '', '', '', '', '', '', false, '',
                   t.created_at + make_interval(mins => k)
            FROM tasks_task t CROSS JOIN generate_series(1, %(last)s) AS k
            WHERE t.organization_id = %(org)s
            """,
            {"org": org.pk, "last": events_per_task},
        )
        cursor.execute(
            """
            INSERT INTO tasks_inboxitem (organization_id, agent_id, task_id, event_id, kind,
                message, read_at, created_at)
            SELECT e.organization_id, e.recipient_id, e.task_id, e.id, e.kind, '',
                   CASE WHEN e.task_id %% 10 <> 0 THEN e.created_at END, e.created_at
            FROM tasks_taskevent e
            WHERE e.organization_id = %s AND e.kind = 'assigned' AND e.recipient_id IS NOT NULL
            """,
            [org.pk],
        )
        cursor.execute("RESET session_replication_role")
    agent = made[1]  # a lead: ten reports, a hundred tasks, a queue
    _, key = api_key_create(organization=org, agent=agent, name="bench")
    task = org.tasks.filter(assignee=agent).order_by("-created_at").first()  # its latest
    get_user_model().objects.filter(username="root").exists() or (
        get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    )
    return {"org": org, "agent": agent, "key": key, "task": task}


def vacuum_analyze() -> None:
    """Planner statistics and the visibility map, as autovacuum leaves a live database."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")


def cases(data: dict) -> dict:
    """Each page or call: a function doing it once (asserting it answered)."""
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.test import Client
    from django.urls import reverse

    from tasks.sweep import sweep_stale_queued

    org, agent, task = data["org"], data["agent"], data["task"]
    api = Client(HTTP_AUTHORIZATION=f"Bearer {data['key']}", HTTP_HOST="localhost")
    console = Client(HTTP_HOST="localhost")
    console.force_login(get_user_model().objects.get(username="root"))
    tasks_list = reverse("admin:tasks_task_changelist")
    only = {"organization__id__exact": org.pk}

    def get(client, url, params=None):
        def once():
            response = client.get(url, params or {})
            assert response.status_code == 200, (url, response.status_code)

        return once

    class Rollback(Exception):
        pass

    def sweep():
        try:
            with transaction.atomic():
                assert sweep_stale_queued().escalated == STALE
                raise Rollback
        except Rollback:
            pass

    return {
        "dashboard": get(console, reverse("admin:index"), {"organization": org.pk}),
        "tasks list": get(console, tasks_list, only),
        "tasks list, assigned": get(console, tasks_list, {**only, "status__exact": "assigned"}),
        "tasks list, needs attention": get(console, tasks_list, {**only, "attention": "needs"}),
        "tasks list, searched": get(console, tasks_list, {**only, "q": SEARCHED}),
        "agent page": get(console, reverse("admin:organization_agent_change", args=[agent.pk])),
        "task page": get(console, reverse("admin:tasks_task_change", args=[task.pk])),
        "roster all": get(api, "/api/roster", {"filter": "all"}),
        "roster my_team": get(api, "/api/roster", {"filter": "my_team"}),
        "roster available": get(api, "/api/roster", {"filter": "available"}),
        "roster by_expertise": get(
            api, "/api/roster", {"filter": "by_expertise", "expertise": "PostgreSQL"}
        ),
        "recommendation": get(api, "/api/delegation/recommendation", {"expertise": "PostgreSQL"}),
        "api tasks, page 1": get(api, "/api/tasks"),
        "api tasks, page 2": get(api, "/api/tasks", {"offset": 50, "limit": 50}),
        "inbox": get(api, "/api/inbox"),
        "stale sweep": sweep,
    }


def measure(data: dict, runs: int) -> dict[str, tuple[float, int]]:
    """(median seconds, statements) of each case."""
    from django.db import connection

    seen = []

    def count(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    results = {}
    for name, once in cases(data).items():
        once()  # warm: sessions, caches, prepared statements
        seen.clear()
        # Not CaptureQueriesContext: each request resets the connection's query log.
        with connection.execute_wrapper(count):
            once()
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            once()
            times.append(time.perf_counter() - started)
        results[name] = (p50(times), len(seen))
    return results


def unstale(org) -> None:
    """Put `org`'s stale tasks back in time, so that the next sweep has the other's alone."""
    from django.utils import timezone

    org.tasks.filter(status="queued").update(queued_at=timezone.now())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per page (median)")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the big organization")
    args = parser.parse_args()
    big_shape = {**BIG, "tasks": int(BIG["tasks"] * args.scale)}
    big_shape["agents"] = int(BIG["agents"] * args.scale)

    started = time.perf_counter()
    with redis_cleanup(), bench_database("bench_bigorg"):
        logging.getLogger("axes").setLevel(logging.WARNING)  # a line per console login
        from organization.models import Organization

        # A second organization in both measurements, as on any shared install: the admin's
        # organization filter (its one query) shows from the second organization on.
        Organization.objects.create(slug="neighbour", name="Neighbour")
        t0 = time.perf_counter()
        small = build("small", **SMALL)
        vacuum_analyze()
        print(f"small organization built in {time.perf_counter() - t0:.1f} s")
        small_results = measure(small, args.runs)
        unstale(small["org"])
        t0 = time.perf_counter()
        big = build("big", **big_shape)
        built = time.perf_counter() - t0
        t0 = time.perf_counter()
        vacuum_analyze()
        print(
            f"big organization built in {built:.0f} s, vacuumed and analyzed in "
            f"{time.perf_counter() - t0:.0f} s ({database_size()})"
        )
        big_results = measure(big, args.runs)

    print(f"\n{'page or call':<28} {'small ms':>9} {'big ms':>9} {'ratio':>6} {'queries':>9}")
    ratios, growth = {}, 0
    for name, (small_s, small_q) in small_results.items():
        big_s, big_q = big_results[name]
        ratios[name] = big_s / small_s
        growth = max(growth, abs(big_q - small_q))
        queries = str(small_q) if small_q == big_q else f"{small_q} → {big_q}"
        print(
            f"{name:<28} {small_s * 1000:9.1f} {big_s * 1000:9.1f} {ratios[name]:6.2f} {queries:>9}"
        )
    worst = max(ratios, key=ratios.get)
    print(f"\nslowest growth: {worst}; whole run {time.perf_counter() - started:.0f} s")
    print(f"RESULT bigorg growth_ratio_max={ratios[worst]:.2f} (target <= {TARGET_GROWTH})")
    print(f"RESULT bigorg queries_growth={growth} (target == 0)")
    return 0 if ratios[worst] <= TARGET_GROWTH and growth == 0 else 1


def database_size() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        return cursor.fetchone()[0]


if __name__ == "__main__":
    sys.exit(main())
