"""The assignment rules of docs/design.md, checked in ONE function whichever door the request used.

`check_assignment` runs inside the move's transaction, the task locked: it locks the target's
row and counts its tasks under that lock, so capacity holds under concurrent requests.
"""

import contextvars
from dataclasses import dataclass
from typing import TypedDict

from infrastructure.errors import Conflict, Forbidden, NotFound
from organization.caller import Caller
from organization.models import Agent, AgentRole, HierarchyRole, Organization, TeamRule
from organization.selectors import reports_to, team_rule_of, workloads_of

from . import sql
from .models import FINISHED_STATUSES, ActorKind, ApprovalPolicy, PolicyScope, PolicyTrigger, Task


@dataclass(frozen=True)
class Actor:
    """Who acts on a task: an agent, a human (user or organization key) or the system."""

    kind: str
    label: str
    agent: Agent | None = None
    user: object | None = None

    @classmethod
    def of(cls, caller: Caller) -> "Actor":
        if caller.agent is not None:
            return cls(ActorKind.AGENT, caller.agent.handle, agent=caller.agent)
        return cls(ActorKind.USER, caller.label, user=caller.user)

    @property
    def is_agent(self) -> bool:
        return self.agent is not None

    def is_(self, agent: Agent | None) -> bool:
        return agent is not None and self.agent is not None and self.agent.pk == agent.pk


class DelegationDecision(TypedDict, total=False):
    """Seed 001's DELEGATION DECISION, stored with a delegate, queue or escalate move (the
    primary choice is the move itself; the Wait Time is the queue's own parameter)."""

    primary_reason: str
    fallback: str
    reasoning: str
    notes: str


SYSTEM = Actor(ActorKind.SYSTEM, "system")


class Move:
    """How a task reaches its target; each kind runs the checks that apply to it."""

    CREATE = "create"
    ASSIGN = "assign"
    CLAIM = "claim"
    DELEGATE = "delegate"
    QUEUE = "queue"
    ESCALATE = "escalate"
    AUTO = "auto"  # the queue's auto-assignment: the system, no role checks


# Moves by which an agent passes the task on: loops and depth are checked for them.
_PASSING_ON = {Move.ASSIGN, Move.DELEGATE, Move.QUEUE}


@dataclass(frozen=True)
class Verdict:
    workload: int
    capacity: int

    @property
    def has_room(self) -> bool:
        return self.workload < self.capacity


def is_cross_team(source: Agent, target: Agent) -> bool:
    """Seeds 000/001: a routing to someone not on the source's team costs coordination; one down
    the source's own reporting line (a manager to its reports) does not, whatever the teams."""
    if source.team_id is not None and source.team_id == target.team_id:
        return False
    return not reports_to(target, source)


def coordination_note(source: Agent, target: Agent) -> str:
    """The note seeds 000/001 ask for in the decision log of a cross-team delegation."""
    mine = source.team.name if source.team_id else "no team"
    theirs = target.team.name if target.team_id else "no team"
    return (
        f"Cross-team delegation: {source.handle} ({mine}) to {target.handle} ({theirs}); "
        "note the coordination overhead."
    )


# The sentences of seed 003's own implementation.
NO_PEER_PERMISSION = "Agent does not have permission to assign tasks to peers"
NO_ESCALATION_PERMISSION = "Agent does not have escalation permission"
NO_ROLE = "Agent does not have a role and peer assignment is disabled"


def _role_of(agent: Agent) -> AgentRole | None:
    try:
        return agent.hierarchy_role
    except AgentRole.DoesNotExist:
        return None


def roles_apply(actor: Actor, task: Task | None) -> bool:
    """Whether seed 003's role checks apply to `actor` moving `task` (None: a task it creates):
    never to a human or the system, nor to a human-created task ("Human-created tasks (no
    created_by_agent_id) bypass all role checks"), whoever passes it on."""
    return actor.is_agent and (task is None or task.created_by_agent_id is not None)


def role_violation(*, rule: TeamRule, source: Agent, target: Agent) -> str | None:
    """Seed 003's enforcement: the sentence of the rule `source → target` breaks, or None."""
    if not rule.require_supervisor_for_tasks or source.pk == target.pk:
        return None
    source_role = _role_of(source)
    if source_role is not None and source_role.role == HierarchyRole.SUPERVISOR:
        return None
    target_role = _role_of(target)
    if target_role is not None and target_role.role == HierarchyRole.SUPERVISOR:
        # No role = a worker, whose can_escalate_to_supervisor defaults to true.
        if source_role is None or source_role.can_escalate_to_supervisor:
            return None
        return NO_ESCALATION_PERMISSION
    if source_role is None:
        return NO_ROLE if not rule.allow_peer_assignment else NO_PEER_PERMISSION
    if rule.allow_peer_assignment and source_role.can_assign_to_peers:
        return None
    return NO_PEER_PERMISSION


def _refresh(agent: Agent, is_paused: bool, workload_capacity: int) -> None:
    agent.is_paused, agent.workload_capacity = is_paused, workload_capacity


def lock_agents(agents) -> None:
    """Lock the agents' rows in pk order, so two transactions never deadlock.

    `agents` are ids or `Agent`s (None ignored). Each `Agent` given is refreshed from its locked
    row: whether it is paused and its capacity are then as current as the lock (rules 2 and 3).
    """
    given: dict[int, list[Agent]] = {}
    for agent in agents:
        if isinstance(agent, Agent):
            given.setdefault(agent.pk, []).append(agent)
        elif agent is not None:
            given.setdefault(agent, [])
    for pk, is_paused, workload_capacity in sql.lock_agent_rows(sorted(given)):
        for agent in given[pk]:
            _refresh(agent, is_paused, workload_capacity)


def lock_agent_named(
    *, org: Organization, handle: str, holder: Agent | None = None
) -> Agent | None:
    """Lock the agent `handle` of `org` and the agent `holder`, in pk order, in one statement,
    and return the named one read in full with its team and role (None if there is none);
    `holder` is refreshed from its locked row (`lock_agents`)."""
    rows = sql.lock_agents_named(
        organization_id=org.pk, handle=handle, with_id=holder.pk if holder is not None else 0
    )
    for row in rows:
        if holder is not None and row.pk == holder.pk:
            _refresh(holder, row.is_paused, row.workload_capacity)
    return next((a for a in rows if a.handle == handle and a.organization_id == org.pk), None)


def lock_workloads(agents) -> dict[int, int]:
    """Lock the agents' rows (ids or `Agent`s, refreshed: `lock_agents`) and count the tasks
    each holds."""
    agents = list(agents)
    if not agents:
        return {}
    lock_agents(agents)
    return workloads_of({a.pk if isinstance(a, Agent) else a for a in agents})


def delegated_by(chain: list[str], handle: str) -> str | None:
    """Who passed the task to `handle` (the entry before its last appearance in the chain)."""
    if handle in chain:
        index = len(chain) - 1 - chain[::-1].index(handle)
        return chain[index - 1] if index > 0 else None
    return chain[-1] if chain else None


def chain_after(chain: list[str], handle: str) -> list[str]:
    return chain if chain[-1:] == [handle] else [*chain, handle]


def check_assignment(
    *,
    org: Organization,
    actor: Actor,
    target: Agent,
    move: str,
    task: Task | None = None,
    rule: TeamRule | None = None,
    workload: int | None = None,
    locked: bool = False,
) -> Verdict:
    """Raise the DomainError of the first rule `actor` giving `task` to `target` breaks.

    Order: tenancy, roles, offline, self-delegation, loops and depth, then capacity under the
    target's row lock. `workload`: counted by the caller already; `locked`: the row is locked.
    """
    if target.organization_id != org.pk:
        raise NotFound(f"Agent not found: {target.handle}", "agent_not_found")
    rule = rule or team_rule_of(org=org)

    if move != Move.AUTO and roles_apply(actor, task):
        violation = role_violation(rule=rule, source=actor.agent, target=target)
        if violation:
            raise Forbidden(violation, "role_forbidden")

    if workload is None and not locked:
        lock_agents([target])
        locked = True
    if target.is_paused:
        hint = "escalate instead" if move == Move.QUEUE else "choose someone else or escalate"
        raise Conflict(
            f"Agent {target.handle} is offline and receives no tasks: {hint}.", "agent_offline"
        )

    chain = list(task.delegation_chain) if task is not None else []
    if move == Move.DELEGATE and actor.is_(target):
        raise Conflict("You cannot delegate a task to yourself.", "self_delegation")
    if actor.is_agent and move in _PASSING_ON and not actor.is_(target):
        if target.handle in chain:
            by = delegated_by(chain, actor.agent.handle)
            who = f"This task was delegated to you by {by}" if by else "You started this task"
            raise Conflict(
                f"Delegation loop: {who}; {target.handle} is already in its delegation chain "
                f"({' → '.join(chain)}). Do not delegate it back: escalate instead.",
                "delegation_loop",
            )
        if len(chain_after(chain, target.handle)) > rule.max_delegation_depth:
            raise Conflict(
                f"Delegation too deep: the chain ({' → '.join(chain)}) would exceed the "
                f"organization's maximum delegation depth of {rule.max_delegation_depth}. "
                "Escalate instead.",
                "delegation_too_deep",
            )

    if workload is None:
        # Counted after the lock is held: a count read before it could miss a concurrent move.
        workload = workloads_of([target.pk])[target.pk]
    verdict = Verdict(workload=workload, capacity=target.workload_capacity)
    if move == Move.QUEUE:
        if verdict.has_room:
            raise Conflict(
                f"Agent {target.handle} has capacity ({workload}/{verdict.capacity}): "
                "assign the task instead of queueing it.",
                "expert_available",
            )
    elif move != Move.ESCALATE and not verdict.has_room:
        raise Conflict(
            f"Agent {target.handle} is at capacity ({workload}/{verdict.capacity}): "
            "queue the task for them or choose someone else.",
            "capacity_exceeded",
        )
    # Last: a move the rules refuse is refused, not sent to a human for approval.
    check_policies(org=org, actor=actor, move=move, target=target, task=task)
    return verdict


def check_parent(*, org: Organization, actor: Actor, parent: Task) -> None:
    """Who may add a subtask to `parent` (issue 11 §1): a human to any task of its organization,
    an agent to a task it holds (403 `parent_not_held`); never to a finished task (409
    `parent_finished`). A task the caller cannot see is 404 before this is asked."""
    if parent.organization_id != org.pk:
        raise NotFound(f"Task not found: {parent.pk}", "task_not_found")
    if actor.is_agent and parent.assignee_id != actor.agent.pk:
        raise Forbidden(
            f"You can add subtasks only to a task you hold; task #{parent.pk} is held by "
            f"{parent.assignee.handle if parent.assignee_id else 'nobody'}.",
            "parent_not_held",
        )
    if parent.status in FINISHED_STATUSES:
        raise Conflict(
            f"Task #{parent.pk} is {parent.status}: a finished task takes no subtasks.",
            "parent_finished",
        )


# --- escalation: who escalates to whom (the move, the stale sweep and the recommendation) ---

# On whose behalf a task is escalated when a human or the system does it: the first one set.
ESCALATION_SOURCE_FIELDS = ("assignee", "queued_by", "created_by_agent", "queued_for")


def escalation_source(task: Task) -> Agent | None:
    """The agent a human or the system escalates `task` for (related rows already loaded)."""
    return next(
        (getattr(task, f) for f in ESCALATION_SOURCE_FIELDS if getattr(task, f"{f}_id")), None
    )


def escalation_candidates(
    *,
    rule: TeamRule,
    source: Agent | None,
    queued_for_id: int | None = None,
    by_roles: bool = False,
) -> list[Agent]:
    """Whom an escalation may go to, first choice first: the source's senior, then the supervisor.

    Never an offline agent, the source, nor back down from the one the task waits for; `by_roles`
    passes over a senior the source may not hand work to as a peer (rule 6, seed 003).
    """
    order = [c for c in (source.senior if source else None, rule.default_supervisor) if c]
    waiting_at = next((i for i, c in enumerate(order) if c.pk == queued_for_id), None)
    if waiting_at is not None:
        order = order[waiting_at + 1 :]
    seen = {pk for pk in (getattr(source, "pk", None), queued_for_id) if pk}
    candidates = []
    for candidate in order:
        if candidate.pk in seen or candidate.is_paused:
            continue
        seen.add(candidate.pk)
        if by_roles and role_violation(rule=rule, source=source, target=candidate) in (
            NO_PEER_PERMISSION,
            NO_ROLE,
        ):
            continue
        candidates.append(candidate)
    return candidates


def escalation_target(
    *,
    rule: TeamRule,
    source: Agent | None,
    queued_for_id: int | None = None,
    by_roles: bool = False,
) -> Agent | None:
    """The source's senior, else the default supervisor; None = humans (`escalation_candidates`).

    A move locks the candidates (`lock_agents`, which refreshes them) and asks again: whether
    one is offline is then read under its lock.
    """
    candidates = escalation_candidates(
        rule=rule, source=source, queued_for_id=queued_for_id, by_roles=by_roles
    )
    return candidates[0] if candidates else None


# --- approval policies: which moves wait for a human (docs/decisions.md) ---------------------


class GateClosed(Exception):
    """A move an approval policy gates: its door records a decision instead (services.gate)."""

    def __init__(self, policy: ApprovalPolicy, reason: str):
        super().__init__(reason)
        self.policy = policy
        self.reason = reason
        self.org = policy.organization


# The decision whose approved move is running in this context: the gate lets it through.
approved_decision: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "agent_org_approved_decision", default=None
)


def gate_applies(org: Organization) -> bool:
    """Whether `org`'s moves meet the gate now: it has a policy, and no approved move runs."""
    return org.has_approval_policies and approved_decision.get() is None


def policies_of(org: Organization, trigger: str) -> list[ApprovalPolicy]:
    return list(
        ApprovalPolicy.objects.filter(organization=org, trigger=trigger, enabled=True).order_by(
            "pk"
        )
    )


def covers(policy: ApprovalPolicy, agent: Agent | None) -> bool:
    """Whether the policy's scope covers `agent` (the one acting, or the one the work goes to)."""
    if policy.scope == PolicyScope.ORGANIZATION:
        return True
    if agent is None:
        return False
    if policy.scope == PolicyScope.TEAM:
        return agent.team_id is not None and agent.team_id == policy.team_id
    return agent.pk == policy.agent_id


def check_policies(
    *, org: Organization, actor: Actor, move: str, target: Agent | None, task: Task | None
) -> None:
    """Raise GateClosed for the first enabled policy that gates this move: a cross-team routing
    by an agent, or a task created or moved at one of a policy's urgencies."""
    if move == Move.AUTO or not gate_applies(org):
        return
    subject = actor.agent or target
    if actor.is_agent and target is not None and move in _PASSING_ON and not actor.is_(target):
        if is_cross_team(actor.agent, target):
            for policy in policies_of(org, PolicyTrigger.CROSS_TEAM_DELEGATION):
                if covers(policy, actor.agent):
                    raise GateClosed(policy, coordination_note(actor.agent, target))
    if task is not None and move != Move.ESCALATE:
        for policy in policies_of(org, PolicyTrigger.URGENCY):
            if task.urgency in policy.urgencies and covers(policy, subject):
                raise GateClosed(policy, f"The task is of {task.urgency} urgency.")


def check_tool_policies(*, org: Organization, agent: Agent | None, tool: str) -> None:
    """Raise GateClosed for the first enabled policy that gates an agent's call of `tool`."""
    if agent is None or not gate_applies(org):
        return
    for policy in policies_of(org, PolicyTrigger.TOOL):
        if tool in policy.tools and covers(policy, agent):
            raise GateClosed(policy, f"A call of the tool {tool} waits for a human.")


def check_cost_policies(*, org: Organization, agent: Agent | None, cost) -> None:
    """Raise GateClosed for the first enabled policy a collaboration estimated at `cost` (USD)
    passes: a session whose estimate is above its `cost_above_usd`."""
    if not gate_applies(org):
        return
    for policy in policies_of(org, PolicyTrigger.COLLABORATION_COST):
        if cost > policy.cost_above_usd and covers(policy, agent):
            raise GateClosed(
                policy,
                f"The collaboration is estimated at up to ${cost:.4f}, above "
                f"${policy.cost_above_usd:.4f}.",
            )


def escalation_policy(*, org: Organization, agent: Agent | None) -> ApprovalPolicy | None:
    """The first enabled `escalation_to_humans` policy covering `agent` (None: none applies)."""
    if not gate_applies(org):
        return None
    return next(
        (p for p in policies_of(org, PolicyTrigger.ESCALATION_TO_HUMANS) if covers(p, agent)),
        None,
    )
