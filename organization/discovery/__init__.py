"""Seed 002's expert discovery, for agents that live in a git worktree and speak files.

- `manifest.py` — the expert manifest and where its files are (AGENT_ORG_MANIFEST_DIR).
- `status.py` — runtime status: reported over the API or written to a status file.
- `experts.py` — discovery: the experts sharing the caller's worktree.
- `tools.py` — the `discover_experts` tool; `api.py` and `urls.py` — the REST views.
- `prompt.py` — the expert-discovery subagent prompt.
- `signals.py` — the manifest refresh on commit when an expert's identity changes.

The names the REST views (`api.py`) use are re-exported here.
"""

from .experts import discover
from .prompt import discovery_prompt_for
from .status import BUSY, IDLE, PENDING, PROCESSING, agent_report_status

__all__ = [
    "BUSY",
    "IDLE",
    "PENDING",
    "PROCESSING",
    "agent_report_status",
    "discover",
    "discovery_prompt_for",
]
