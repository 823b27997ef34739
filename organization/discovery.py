"""Seed 002's expert discovery, for agents that live in a git worktree and speak files.

- The manifest: a JSON array of `{expert_id, name, role, worktree_path, agent_id}`, one
  entry per agent of the organization whatever its state, sorted by `expert_id` (the
  agent's primary key: a stable integer), `[]` for none, written atomically.
- Runtime status: `pending` (idle) or `processing` (busy), reported by
  `POST /api/agents/me/status` or written by the agent's hook to `<status dir>/expert{id}`;
  the newer of the two wins; unknown or missing reads as busy, the safe default.
- Discovery: the experts that share the caller's `worktree_path` (null matches only
  null), the caller excluded, with `idle` | `busy` — `GET /api/experts` and the
  `discover_experts` tool.
- The subagent prompt (`templates/organization/expert-discovery.md`) that tells a
  file-based agent where those files are, to filter by its worktree, and never to write.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.template import TemplateDoesNotExist
from django.template.loader import get_template
from django.utils import timezone

from .caller import Caller
from .errors import Forbidden, Invalid
from .models import Agent, Organization
from .registry import register_tool
from .selectors import agent_by_handle, agents_of

MANIFEST_NAME = "experts_manifest.json"
STATUS_DIR_NAME = "status"
DISCOVERY_TEMPLATE = "organization/expert-discovery.md"
DISCOVERY_DESCRIPTION = (
    "Query information about other experts in your worktree: their IDs, names, roles, "
    "and current status (idle/busy)."
)
# Used in the prompt when no manifest directory is configured (seed 002's relative fallback).
DEFAULT_MANIFEST_PATH = f".agent-org/{MANIFEST_NAME}"
DEFAULT_STATUS_DIR = f".agent-org/{STATUS_DIR_NAME}"

PENDING = "pending"
PROCESSING = "processing"
REPORTABLE = (PENDING, PROCESSING)
IDLE = "idle"
BUSY = "busy"

# The fields whose change alters a manifest entry: name, handle, job title, worktree.
MANIFEST_FIELDS = ("handle", "name", "role", "worktree_path")


# --- paths ---------------------------------------------------------------------------


def manifest_dir() -> Path | None:
    """`settings.AGENT_ORG_MANIFEST_DIR`, else the environment variable of that name."""
    value = getattr(settings, "AGENT_ORG_MANIFEST_DIR", None)
    if value is None:
        value = os.environ.get("AGENT_ORG_MANIFEST_DIR", "")
    return Path(value) if value else None


def org_dir(org: Organization) -> Path | None:
    """`<AGENT_ORG_MANIFEST_DIR>/<org slug>`: each organization's files apart from the others'."""
    base = manifest_dir()
    return base / org.slug if base is not None else None


def manifest_path(org: Organization) -> Path | None:
    folder = org_dir(org)
    return folder / MANIFEST_NAME if folder is not None else None


def status_dir(org: Organization) -> Path | None:
    folder = org_dir(org)
    return folder / STATUS_DIR_NAME if folder is not None else None


# --- the manifest --------------------------------------------------------------------


def manifest_entry(agent: Agent) -> dict:
    return {
        "expert_id": agent.pk,
        "name": agent.name,
        "role": agent.role,
        "worktree_path": agent.worktree_path,
        "agent_id": agent.handle,
    }


def generate_manifest(*, org: Organization) -> list[dict]:
    """Every agent of `org`, paused or not, sorted by expert_id; `[]` for none."""
    agents = agents_of(org=org).order_by("pk").only("pk", *MANIFEST_FIELDS)
    return [manifest_entry(agent) for agent in agents]


def manifest_json(entries: list[dict]) -> str:
    return json.dumps(entries, indent=2, ensure_ascii=False) + "\n"


def write_atomically(path: Path, content: str) -> Path:
    """Write `content` to `path` through a temp file + rename: a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def write_manifest(*, org: Organization, path: Path | None = None) -> Path | None:
    """Write `org`'s manifest to `path` (default: its file under AGENT_ORG_MANIFEST_DIR).

    Returns the path written, or None when there is nowhere to write or nothing changed
    (an unchanged manifest is not rewritten, so its readers and mtime stay still).
    """
    path = path or manifest_path(org)
    if path is None:
        return None
    content = manifest_json(generate_manifest(org=org))
    try:
        if Path(path).read_text(encoding="utf-8") == content:
            return None
    except OSError:
        pass
    return write_atomically(path, content)


def refresh_manifest(org_id: int) -> Path | None:
    """Regenerate organization `org_id`'s manifest file, if a manifest directory is set."""
    if manifest_dir() is None:
        return None
    org = Organization.objects.filter(pk=org_id).first()
    if org is None:
        return None
    return write_manifest(org=org)


# --- runtime status ------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeStatus:
    value: str  # what was reported, trimmed ("" when nothing was)
    at: datetime | None

    @property
    def status(self) -> str:
        return IDLE if self.value == PENDING else BUSY


def status_file(org: Organization, expert_id: int) -> Path | None:
    folder = status_dir(org)
    return folder / f"expert{expert_id}" if folder is not None else None


def read_status_file(path: Path | None) -> RuntimeStatus | None:
    """The trimmed content of a status file and its mtime; None when missing or unreadable."""
    if path is None:
        return None
    try:
        stat = path.stat()
        content = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return RuntimeStatus(content, datetime.fromtimestamp(stat.st_mtime, tz=UTC))


def runtime_status_of(agent: Agent, org: Organization | None = None) -> RuntimeStatus:
    """The last status written, by the API or by the status file, whichever is newer."""
    reported = RuntimeStatus((agent.runtime_status or "").strip(), agent.runtime_status_at)
    from_file = read_status_file(status_file(org or agent.organization, agent.pk))
    if from_file is None:
        return reported
    if reported.at is None or from_file.at >= reported.at:
        return from_file
    return reported


@transaction.atomic
def agent_report_status(*, agent: Agent, status: str) -> RuntimeStatus:
    """Record `pending` / `processing` for `agent`, and mirror it to its status file."""
    value = (status or "").strip()
    if value not in REPORTABLE:
        raise Invalid("status must be 'pending' or 'processing'.", "invalid_status")
    now = timezone.now()
    Agent.objects.filter(pk=agent.pk).update(runtime_status=value, runtime_status_at=now)
    agent.runtime_status, agent.runtime_status_at = value, now
    path = status_file(agent.organization, agent.pk)
    if path is not None:
        # File readers (seed 002's subagent) see the same status; written after commit.
        transaction.on_commit(lambda: write_atomically(path, value + "\n"), robust=True)
    return RuntimeStatus(value, now)


# --- discovery -----------------------------------------------------------------------


def expert_view(agent: Agent, org: Organization) -> dict:
    runtime = runtime_status_of(agent, org)
    return {**manifest_entry(agent), "status": runtime.status}


def experts_for(*, org: Organization, agent: Agent | None) -> list[dict]:
    """The experts sharing `agent`'s worktree (null matches only null), `agent` excluded.

    `agent=None` (a human's view) lists every agent of the organization.
    """
    experts = agents_of(org=org).order_by("pk")
    if agent is not None:
        if agent.worktree_path is None:
            experts = experts.filter(worktree_path__isnull=True)
        else:
            experts = experts.filter(worktree_path=agent.worktree_path)
        experts = experts.exclude(pk=agent.pk)
    fields = ("pk", *MANIFEST_FIELDS, "runtime_status", "runtime_status_at")
    return [expert_view(a, org) for a in experts.only(*fields)]


def discover(*, caller: Caller, agent_param: str | None = None) -> dict:
    """`GET /api/experts` and `discover_experts`: whose view, and the experts in it."""
    agent = caller.agent
    if agent is None and agent_param:
        agent = agent_by_handle(org=caller.organization, handle=agent_param)
    elif agent is not None and agent_param and agent_param != agent.handle:
        raise Forbidden(
            "An agent discovers experts from its own worktree only.", "identity_mismatch"
        )
    return {
        "agent_id": agent.handle if agent else None,
        "expert_id": agent.pk if agent else None,
        "worktree_path": agent.worktree_path if agent else None,
        "experts": experts_for(org=caller.organization, agent=agent),
    }


DISCOVER_SCHEMA = {
    "type": "object",
    "properties": {
        "agent": {
            "type": "string",
            "description": "Organization keys only: whose worktree to look from (an agent id).",
        },
    },
    "additionalProperties": False,
}


@register_tool(
    "discover_experts",
    "List the experts that share your worktree (seed 002): agent_id, expert_id, name, role, "
    "worktree_path and status (idle/busy). Read-only.",
    DISCOVER_SCHEMA,
    read_only=True,
)
def discover_experts(caller: Caller, params: dict) -> dict:
    return discover(caller=caller, agent_param=params.get("agent"))


# --- the subagent prompt -------------------------------------------------------------


def discovery_paths(org: Organization) -> tuple[str, str]:
    manifest = manifest_path(org)
    statuses = status_dir(org)
    return (
        str(manifest) if manifest is not None else DEFAULT_MANIFEST_PATH,
        str(statuses) if statuses is not None else DEFAULT_STATUS_DIR,
    )


def render_discovery_prompt(agent: Agent, *, template_name: str = DISCOVERY_TEMPLATE) -> str | None:
    """Seed 002's expert-discovery subagent prompt for `agent`; None without the template."""
    try:
        template = get_template(template_name)
    except TemplateDoesNotExist:
        return None
    manifest, statuses = discovery_paths(agent.organization)
    return template.render(
        {
            "expert_id": agent.pk,
            "expert_name": agent.name,
            "agent_id": agent.handle,
            "worktree_path": agent.worktree_path,
            "manifest_path": manifest,
            "status_dir": statuses,
        }
    ).strip()


def render_agents_json(agent: Agent, *, template_name: str = DISCOVERY_TEMPLATE) -> dict:
    """The subagents a CLI agent is launched with: `{"expert-discovery": {description, prompt}}`.

    Without the template the discovery agent is simply absent (seed 002, property 4).
    """
    prompt = render_discovery_prompt(agent, template_name=template_name)
    if prompt is None:
        return {}
    return {"expert-discovery": {"description": DISCOVERY_DESCRIPTION, "prompt": prompt}}


def discovery_prompt_for(agent: Agent) -> dict:
    manifest, statuses = discovery_paths(agent.organization)
    if manifest_dir() is not None:
        # A prompt that points at a file that was never written would send the agent astray.
        path = manifest_path(agent.organization)
        if not path.exists():
            write_manifest(org=agent.organization)
    return {
        "agent_id": agent.handle,
        "expert_id": agent.pk,
        "worktree_path": agent.worktree_path,
        "manifest_path": manifest,
        "status_dir": statuses,
        "agents": render_agents_json(agent),
    }
