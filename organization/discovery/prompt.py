"""Seed 002's expert-discovery subagent prompt (`templates/organization/expert-discovery.md`):
it tells a file-based agent where the manifest and status files are, to filter by its worktree,
and never to write.
"""

from django.template import TemplateDoesNotExist
from django.template.loader import get_template

from ..models import Agent, Organization
from .manifest import MANIFEST_NAME, STATUS_DIR_NAME, files_dir, write_manifest

DISCOVERY_TEMPLATE = "organization/expert-discovery.md"
DISCOVERY_DESCRIPTION = (
    "Query information about other experts in your worktree: their IDs, names, roles, "
    "and current status (idle/busy)."
)
# Used in the prompt when no manifest directory is configured (seed 002's relative fallback).
DEFAULT_MANIFEST_PATH = f".agent-org/{MANIFEST_NAME}"
DEFAULT_STATUS_DIR = f".agent-org/{STATUS_DIR_NAME}"


def discovery_paths(org: Organization) -> tuple[str, str]:
    folder = files_dir(org)
    if folder is None:
        return DEFAULT_MANIFEST_PATH, DEFAULT_STATUS_DIR
    return str(folder / MANIFEST_NAME), str(folder / STATUS_DIR_NAME)


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
    folder = files_dir(agent.organization)
    if folder is not None and not (folder / MANIFEST_NAME).exists():
        # A prompt that points at a file that was never written would send the agent astray.
        write_manifest(org=agent.organization)
    return {
        "agent_id": agent.handle,
        "expert_id": agent.pk,
        "worktree_path": agent.worktree_path,
        "manifest_path": manifest,
        "status_dir": statuses,
        "agents": render_agents_json(agent),
    }
