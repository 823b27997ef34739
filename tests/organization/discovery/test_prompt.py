"""Seed 002's expert-discovery subagent prompt (its agents.rs, template.rs and content tables)."""

import json

import pytest

from organization.discovery.prompt import (
    DISCOVERY_TEMPLATE,
    render_agents_json,
    render_discovery_prompt,
)

pytestmark = pytest.mark.django_db

TEMPLATE_FILE = "templates/organization/expert-discovery.md"


@pytest.fixture
def template_text(settings):
    from pathlib import Path

    return (Path(settings.BASE_DIR) / TEMPLATE_FILE).read_text()


def prompt_of(client, handle):
    response = client.get(f"/api/agents/{handle}/discovery-prompt")
    assert response.status_code == 200, response.content
    return response.json()


# --- content tests -------------------------------------------------------------------


def test_discovery_template_contains_manifest_path_variable(template_text):
    assert "{{ manifest_path }}" in template_text


def test_discovery_template_contains_status_dir_variable(template_text):
    assert "{{ status_dir }}/expert{id}" in template_text


def test_discovery_template_contains_worktree_filter_instruction(template_text):
    assert "Filter by worktree" in template_text
    assert "null matches only null" in template_text


def test_discovery_template_is_read_only(template_text):
    assert "You are read-only. Never write" in template_text
    assert "not the manifest, not any status file" in template_text


def test_discovery_template_contains_worktree_path_variable(template_text):
    assert "{{ worktree_path }}" in template_text


def test_discovery_template_maps_statuses_as_the_seed(template_text):
    assert '"pending" -> idle' in template_text
    assert '"processing" -> busy' in template_text
    assert "missing or unreadable file -> busy" in template_text


# --- render_agents_json --------------------------------------------------------------


def test_render_agents_json_includes_discovery_agent(acme, cast, no_manifest_dir):
    agents = render_agents_json(cast["ivan"])
    assert list(agents) == ["expert-discovery"]
    assert agents["expert-discovery"]["description"].startswith(
        "Query information about other experts"
    )


def test_render_agents_json_discovery_absent_without_template(acme, cast, no_manifest_dir):
    """Property 4: without the template, behave as before: no discovery agent."""
    assert render_agents_json(cast["ivan"], template_name="organization/absent.md") == {}
    assert render_discovery_prompt(cast["ivan"], template_name="organization/absent.md") is None


def test_render_agents_json_discovery_renders_manifest_path(acme, cast, manifest_dir):
    prompt = render_agents_json(cast["ivan"])["expert-discovery"]["prompt"]
    assert f"Read the manifest file at {manifest_dir}/acme/experts_manifest.json" in prompt


def test_render_agents_json_discovery_renders_status_dir(acme, cast, manifest_dir):
    prompt = render_discovery_prompt(cast["ivan"])
    assert f"{manifest_dir}/acme/status/expert{{id}}" in prompt
    assert f"{manifest_dir}/acme/status/expert{cast['ivan'].pk} is your own" in prompt


def test_render_agents_json_discovery_renders_worktree_path(acme, cast, no_manifest_dir):
    assert 'worktree_path: "/repo/wt-1"' in render_discovery_prompt(cast["ivan"])
    assert "worktree_path: null (the main repository)" in render_discovery_prompt(cast["alyosha"])


def test_the_prompt_falls_back_to_relative_paths_without_a_dir(acme, cast, no_manifest_dir):
    prompt = render_discovery_prompt(cast["ivan"])
    assert "Read the manifest file at .agent-org/experts_manifest.json" in prompt


def test_the_prompt_is_plain_text_not_html(acme, cast, no_manifest_dir):
    cast["ivan"].name = 'Ivan <&> "Karamazov"'
    cast["ivan"].save()
    assert 'Ivan <&> "Karamazov"' in render_discovery_prompt(cast["ivan"])


# --- the endpoint --------------------------------------------------------------------


def test_an_agent_reads_its_discovery_prompt(acme, cast, agent_client, manifest_dir):
    body = prompt_of(agent_client(cast["ivan"]), "agent-ivan")
    assert body["agent_id"] == "agent-ivan"
    assert body["expert_id"] == cast["ivan"].pk
    assert body["worktree_path"] == "/repo/wt-1"
    assert body["manifest_path"] == str(manifest_dir / "acme" / "experts_manifest.json")
    assert body["status_dir"] == str(manifest_dir / "acme" / "status")
    assert body["agents"]["expert-discovery"]["prompt"] == render_discovery_prompt(cast["ivan"])


def test_the_prompt_endpoint_makes_sure_the_manifest_exists(acme, cast, agent_client, manifest_dir):
    body = prompt_of(agent_client(cast["ivan"]), "agent-ivan")
    with open(body["manifest_path"]) as handle:
        assert len(json.load(handle)) == 5


def test_another_agents_prompt_is_404(acme, cast, agent_client, no_manifest_dir):
    response = agent_client(cast["ivan"]).get("/api/agents/agent-grusha/discovery-prompt")
    assert response.status_code == 404
    assert response.json()["code"] == "agent_not_found"


def test_an_organization_key_reads_any_agents_prompt(acme, cast, org_client, no_manifest_dir):
    body = prompt_of(org_client(acme), "agent-grusha")
    assert body["agent_id"] == "agent-grusha"
    assert DISCOVERY_TEMPLATE.endswith(".md")


# --- template.rs: what the agent is launched with passes the paths through ------------


def test_load_instruction_passes_manifest_path_to_agents(acme, cast, manifest_dir):
    from organization.discovery.prompt import discovery_prompt_for

    loaded = discovery_prompt_for(cast["ivan"])
    assert loaded["manifest_path"] in loaded["agents"]["expert-discovery"]["prompt"]


def test_load_instruction_passes_status_dir_to_agents(acme, cast, manifest_dir):
    from organization.discovery.prompt import discovery_prompt_for

    loaded = discovery_prompt_for(cast["ivan"])
    assert f"{loaded['status_dir']}/expert{{id}}" in loaded["agents"]["expert-discovery"]["prompt"]


def test_load_instruction_passes_worktree_path_to_agents(acme, cast, no_manifest_dir):
    from organization.discovery.prompt import discovery_prompt_for

    loaded = discovery_prompt_for(cast["ivan"])
    assert loaded["worktree_path"] == "/repo/wt-1"
    assert 'worktree_path: "/repo/wt-1"' in loaded["agents"]["expert-discovery"]["prompt"]


def test_discovery_template_handles_the_seeds_error_cases(template_text):
    """Seed 002's error table: a missing manifest, a malformed one, an unreadable status."""
    assert '"No expert manifest found. The Agent Org service may not have generated it yet."' in (
        template_text
    )
    assert "If it is not valid JSON, report the parse error" in template_text
    assert "export_manifest" in template_text
    assert "a missing or unreadable file -> busy" in template_text
