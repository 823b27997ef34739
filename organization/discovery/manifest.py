"""Seed 002's expert manifest: one `{expert_id, name, role, worktree_path, agent_id}` per agent,
sorted by `expert_id`, written atomically under `<AGENT_ORG_MANIFEST_DIR>/<org slug>/`, beside
the status files.
"""

import contextlib
import json
import os
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.validators import slug_re

from ..models import Agent, Organization
from ..selectors import agents_of

MANIFEST_NAME = "experts_manifest.json"
STATUS_DIR_NAME = "status"

# The fields whose change alters a manifest entry: name, handle, job title, worktree.
MANIFEST_FIELDS = ("handle", "name", "role", "worktree_path")


# --- paths ---------------------------------------------------------------------------


def manifest_dir() -> Path | None:
    """`settings.AGENT_ORG_MANIFEST_DIR`, else the environment variable of that name."""
    value = getattr(settings, "AGENT_ORG_MANIFEST_DIR", None)
    if value is None:
        value = os.environ.get("AGENT_ORG_MANIFEST_DIR", "").strip()
    return Path(value) if value else None


def org_dir(org: Organization) -> Path | None:
    """`<AGENT_ORG_MANIFEST_DIR>/<org slug>`: each organization's files apart from the others'.

    ValueError for a slug that is not one (`..`, `/`, empty): its files would land elsewhere.
    """
    base = manifest_dir()
    if base is None:
        return None
    if not slug_re.match(org.slug):
        raise ValueError(f"Organization slug {org.slug!r} is not a slug: no files under {base}.")
    return base / org.slug


def files_dir(org: Organization) -> Path | None:
    """`org_dir`, or None for an organization whose stored slug is no slug: it has no files
    (its statuses come from the API only; its prompt gives seed 002's relative defaults)."""
    try:
        return org_dir(org)
    except ValueError:
        return None


def manifest_path(org: Organization) -> Path | None:
    folder = org_dir(org)
    return folder / MANIFEST_NAME if folder is not None else None


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
    if org is None or files_dir(org) is None:
        return None
    return write_manifest(org=org)
