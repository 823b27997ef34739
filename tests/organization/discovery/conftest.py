"""Fixtures of the expert-discovery tests (seed 002): a manifest directory, a small worktree cast."""

import pytest

from tests.factories import make_agent, make_org


@pytest.fixture
def manifest_dir(tmp_path, settings):
    """AGENT_ORG_MANIFEST_DIR set to a fresh directory: on-commit refresh is on."""
    settings.AGENT_ORG_MANIFEST_DIR = str(tmp_path / "manifests")
    return tmp_path / "manifests"


@pytest.fixture
def no_manifest_dir(settings):
    settings.AGENT_ORG_MANIFEST_DIR = ""


@pytest.fixture
def acme(db):
    return make_org("acme", name="Acme")


@pytest.fixture
def cast(acme):
    """Alyosha and Dmitri in the main repo, Ivan and Grusha in worktree wt-1, Smerdy in wt-2."""
    return {
        "alyosha": make_agent(acme, "agent-alyosha", name="Alyosha", role="architect"),
        "dmitri": make_agent(acme, "agent-dmitri", name="Dmitri", role="developer"),
        "ivan": make_agent(
            acme, "agent-ivan", name="Ivan", role="reviewer", worktree_path="/repo/wt-1"
        ),
        "grusha": make_agent(
            acme, "agent-grusha", name="Grusha", role="tester", worktree_path="/repo/wt-1"
        ),
        "smerdy": make_agent(
            acme, "agent-smerdy", name="Smerdy", role="cook", worktree_path="/repo/wt-2"
        ),
    }
