#!/usr/bin/env python
"""An agent on the inside: a small agent loop that works through Agent Org's MCP server.

Each round it reads its context (its system prompt) and the roster, takes a task from its
inbox, asks the recommendation tool for seed 001's ranked candidates, decides — with an
OpenAI-compatible model when OPENAI_API_KEY is set, else offline (the recommendation's own
decision, deterministic) — acts (delegate_task / queue_task / escalate_task) and logs the
seed-001 DELEGATION DECISION.

    python manage.py seed_demo
    KEY=$(python manage.py create_api_key --org demo --agent agent-sarah)
    python -m config.serve &                   # or: make run
    python examples/agent_loop.py --key "$KEY" --create-task "Speed up the orders query" \\
        --expertise PostgreSQL --once

Real model: OPENAI_API_KEY (and OPENAI_BASE_URL for Ollama, vLLM, LM Studio …), --model.
Needs only the `mcp` SDK (and `openai` for a real model); it never imports the service.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
from dataclasses import dataclass

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

log = logging.getLogger("agent_loop")
DECISIONS = ("DELEGATE", "QUEUE", "ESCALATE")
HELD = ("assigned", "in_progress")


class ToolError(Exception):
    def __init__(self, body: dict):
        super().__init__(f"{body.get('code')}: {body.get('error')}")
        self.body = body
        self.code = body.get("code")


@dataclass
class Decision:
    decision: str  # DELEGATE | QUEUE | ESCALATE
    agent_id: str | None
    primary: str
    fallback: str
    reasoning: str
    notes: str
    wait_seconds: int | None = None

    def text(self) -> str:
        """Seed 001's decision format."""
        lines = ["DELEGATION DECISION:", f"Primary Choice: {self.primary}"]
        if self.fallback:
            lines.append(f"Fallback: {self.fallback}")
        lines.append(
            f"Decision: {self.decision}" + (f" ({self.agent_id})" if self.agent_id else "")
        )
        lines.append(f"Reasoning: {self.reasoning}")
        if self.decision == "QUEUE" and self.wait_seconds is not None:
            lines.append(f"Wait Time: {self.wait_seconds} s")
        if self.notes:
            lines.append(f"Notes: {self.notes}")
        return "\n".join(lines)


class Agent:
    """The loop's side of the MCP session: every call goes through the registry's tools."""

    def __init__(self, client: Client):
        self.client = client

    async def call(self, name: str, **arguments) -> dict:
        result = await self.client.call_tool(name, arguments)
        body = json.loads(result.content[0].text)
        if result.is_error:
            raise ToolError(body)
        return body

    async def take_task(self, prefer: int | None = None) -> dict | None:
        """`prefer` if held; else the newest task of the inbox that this agent still holds; else any."""
        mine = await self.call("get_my_tasks", role="assigned")
        held = {t["id"]: t for t in mine["tasks"] if t["status"] in HELD}
        if prefer in held:
            return held[prefer]
        inbox = await self.call("get_inbox", unread_only=True, limit=50)
        for item in inbox["items"]:
            task = item.get("task") or {}
            if task.get("id") in held and held[task["id"]]["required_expertise"]:
                return held[task["id"]]
        return next((t for t in held.values() if t["required_expertise"]), None)


def offline_decision(rec: dict) -> Decision:
    primary, fallback = rec["primary_choice"], rec.get("fallback")
    return Decision(
        decision=rec["decision"],
        agent_id=primary.get("id"),
        primary=f"{primary['name']} ({primary['reason']})",
        fallback=f"{fallback['name']} ({fallback['reason']})" if fallback else "",
        reasoning=rec["reasoning"],
        notes="offline: no model configured, the recommendation tool's decision was taken",
        wait_seconds=primary.get("estimated_wait_seconds"),
    )


def llm_decision(
    *, system_prompt: str, roster: dict, task: dict, rec: dict, model: str
) -> Decision | None:
    """Ask an OpenAI-compatible model to choose; None when its answer is not a valid choice."""
    from openai import OpenAI

    client = OpenAI(timeout=60, max_retries=2)
    candidates = [
        {k: c.get(k) for k in ("id", "name", "tier", "reason", "estimated_wait_seconds")}
        for c in rec["candidates"]
    ]
    colleagues = [
        {k: c[k] for k in ("id", "name", "role", "team", "status", "current_workload")}
        for c in roster["colleagues"]
    ]
    prompt = (
        f"A task you hold needs a DELEGATION DECISION.\n"
        f"Task #{task['id']}: {task['title']} (expertise {task['required_expertise']}, "
        f"urgency {task['urgency']})\n{task.get('description') or ''}\n\n"
        f"Colleagues: {json.dumps(colleagues)}\n"
        f"Ranked candidates (seed 001 tiers; tier 5 = escalate): {json.dumps(candidates)}\n"
        f"The framework suggests: {rec['decision']}.\n\n"
        'Answer with one JSON object only: {"decision": "DELEGATE|QUEUE|ESCALATE", '
        '"agent_id": "<candidate id, or null to escalate>", "primary_reason": "...", '
        '"fallback": "...", "reasoning": "1-2 sentences", "notes": "..."}'
    )
    response = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": prompt},
        ],
        temperature=0,
    )
    text = response.choices[0].message.content or ""
    match = re.search(r"\{.*\}", text, re.S)
    try:
        answer = json.loads(match.group(0)) if match else {}
    except json.JSONDecodeError:
        answer = {}
    decision = str(answer.get("decision", "")).upper()
    by_id = {c["id"]: c for c in rec["candidates"] if c.get("id")}
    agent_id = answer.get("agent_id")
    if decision not in DECISIONS or (decision != "ESCALATE" and agent_id not in by_id):
        log.warning("the model's answer is not a valid choice; using the recommendation: %r", text)
        return None
    chosen = by_id.get(agent_id) if decision != "ESCALATE" else rec["escalate_to"]
    return Decision(
        decision=decision,
        agent_id=agent_id if decision != "ESCALATE" else None,
        primary=f"{chosen['name']} ({answer.get('primary_reason') or chosen['reason']})",
        fallback=str(answer.get("fallback") or ""),
        reasoning=str(answer.get("reasoning") or ""),
        notes=str(answer.get("notes") or f"decided by {model}"),
        wait_seconds=chosen.get("estimated_wait_seconds"),
    )


async def act(agent: Agent, task: dict, d: Decision) -> dict:
    # Every move keeps the whole DELEGATION DECISION in the task's audit trail.
    decision = {
        "primary_reason": d.primary,
        "fallback": d.fallback,
        "reasoning": d.reasoning,
        "notes": d.notes,
    }
    if d.decision == "DELEGATE":
        return await agent.call(
            "delegate_task", task_id=task["id"], agent_id=d.agent_id, **decision
        )
    if d.decision == "QUEUE":
        wait = {"wait_time_seconds": d.wait_seconds} if d.wait_seconds is not None else {}
        return await agent.call(
            "queue_task", task_id=task["id"], agent_id=d.agent_id, **decision, **wait
        )
    return await agent.call("escalate_task", task_id=task["id"], **decision)


async def one_round(agent: Agent, *, model: str | None, prefer: int | None = None) -> dict | None:
    """Read context and roster, take a task, decide, act. Returns the task after, or None."""
    context = await agent.call("get_my_context")
    roster = await agent.call("get_organization_roster", filter="all")
    me = roster["agent_context"]
    log.info(
        "I am %s (%s), %s/%s tasks; %d colleagues",
        me["name"], me["id"], me["current_workload"], me["workload_capacity"],
        len(roster["colleagues"]),
    )  # fmt: skip
    task = await agent.take_task(prefer)
    if task is None:
        log.info("nothing to route: no held task with a required expertise")
        return None
    log.info("took task #%s %r (needs %s)", task["id"], task["title"], task["required_expertise"])
    rec = await agent.call(
        "recommend_delegate",
        expertise=task["required_expertise"],
        urgency=task["urgency"],
        exclude=[h for h in task["delegation_chain"] if h != me["id"]],
    )
    decision = None
    if model:
        decision = await asyncio.to_thread(
            llm_decision,
            system_prompt=context["system_prompt"],
            roster=roster,
            task=task,
            rec=rec,
            model=model,
        )
    decision = decision or offline_decision(rec)
    log.info("\n%s", decision.text())
    try:
        after = await act(agent, task, decision)
    except ToolError as refused:
        # The orchestrator has the last word (capacity, offline, loops, roles): escalate.
        log.warning("refused: %s; escalating instead", refused)
        if decision.decision == "ESCALATE":
            raise
        after = await agent.call(
            "escalate_task", task_id=task["id"], reason=f"{decision.decision} refused: {refused}"
        )
    log.info("task #%s is now %s (assignee %s)", after["id"], after["status"], after["assignee"])
    return after


async def main_async(args) -> int:
    key = args.key or os.environ.get("AGENT_ORG_KEY", "")
    if not key:
        sys.exit("Pass --key <agent key> or set AGENT_ORG_KEY.")
    model = args.model if os.environ.get("OPENAI_API_KEY") else None
    log.info("deciding with %s", model or "the offline provider (no OPENAI_API_KEY)")
    transport = streamable_http_client(
        f"{args.url.rstrip('/')}/mcp",
        http_client=create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}),
    )
    async with Client(transport, read_timeout_seconds=120) as client:
        agent = Agent(client)
        created = {}
        if args.create_task:
            me = (await agent.call("get_organization_roster", filter="my_team"))["agent_context"]
            created = await agent.call(
                "create_task",
                title=args.create_task,
                required_expertise=args.expertise,
                urgency=args.urgency,
                agent_id=me["id"],
            )
            log.info("created task #%s for myself", created["id"])
        rounds = 0
        while True:
            # The task it was asked to create comes first (its own act left no inbox item).
            after = await one_round(agent, model=model, prefer=created.get("id"))
            created = {}
            rounds += 1
            if args.once or after is None or (args.rounds and rounds >= args.rounds):
                return 0
            await asyncio.sleep(args.interval)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("AGENT_ORG_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--key", help="An agent key (default: $AGENT_ORG_KEY)")
    parser.add_argument("--model", default=os.environ.get("AGENT_ORG_MODEL", "gpt-4o-mini"))
    parser.add_argument("--once", action="store_true", help="One round, then stop")
    parser.add_argument("--rounds", type=int, default=0, help="Stop after N rounds (0: until idle)")
    parser.add_argument("--interval", type=float, default=5.0, help="Seconds between rounds")
    parser.add_argument("--create-task", metavar="TITLE", help="First create a task for myself")
    parser.add_argument("--expertise", default="PostgreSQL", help="…with this required expertise")
    parser.add_argument(
        "--urgency", default="normal", choices=["low", "normal", "high", "critical"]
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    for noisy in ("httpx", "httpx2", "mcp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
