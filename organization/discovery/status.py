"""Seed 002's runtime status: `pending` (idle) or `processing` (busy), reported by
`POST /api/agents/me/status` or written by the agent's hook to `<status dir>/expert{id}`; the
newer of the two wins; unknown or missing reads as busy, the safe default.
"""

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from infrastructure.errors import Invalid

from ..models import Agent, AgentStatus, Organization
from .manifest import STATUS_DIR_NAME, files_dir, write_atomically

PENDING = "pending"
PROCESSING = "processing"
REPORTABLE = (PENDING, PROCESSING)
# What discovery shows: the two of the roster's four words a runtime status can mean.
IDLE = AgentStatus.IDLE.value
BUSY = AgentStatus.BUSY.value


@dataclass(frozen=True)
class RuntimeStatus:
    value: str  # what was reported, trimmed ("" when nothing was)
    at: datetime | None

    @property
    def status(self) -> str:
        return IDLE if self.value == PENDING else BUSY


def status_file(org: Organization, expert_id: int) -> Path | None:
    folder = files_dir(org)
    return folder / STATUS_DIR_NAME / f"expert{expert_id}" if folder is not None else None


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
