"""Seed 002's expert discovery, for agents that live in a git worktree and speak files.

The manifest, runtime status, discovery, its tool, REST views, subagent prompt and manifest
refresh each have a module; the names the REST views use are re-exported here.
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
