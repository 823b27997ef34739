"""Seed 002's manifest freshness: regenerated on commit of every identity or worktree change."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction

from organization.discovery import signals
from organization.models import Agent
from tests.factories import make_agent

pytestmark = pytest.mark.django_db


def manifest(manifest_dir, slug="acme"):
    path = manifest_dir / slug / "experts_manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def refreshes(callbacks) -> list:
    return [c for c in callbacks if isinstance(c, signals.ManifestRefresh)]


def test_creating_an_agent_writes_the_manifest_on_commit(
    acme, manifest_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        make_agent(acme, "agent-new", name="New", role="developer")
        assert manifest(manifest_dir) is None  # not before the commit
    assert refreshes(callbacks) == [signals.ManifestRefresh(acme.pk)]
    callbacks[0]()
    assert [e["agent_id"] for e in manifest(manifest_dir)] == ["agent-new"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("name", "Alexei"),
        ("role", "chief architect"),
        ("worktree_path", "/repo/wt-9"),
    ],
)
def test_an_identity_or_worktree_change_refreshes(
    acme, cast, manifest_dir, field, value, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        setattr(cast["alyosha"], field, value)
        cast["alyosha"].save()
    assert len(refreshes(callbacks)) == 1
    assert manifest(manifest_dir)[0][field] == value


def test_an_id_is_fixed_so_no_rename_of_it_refreshes(
    acme, cast, manifest_dir, django_capture_on_commit_callbacks
):
    # The id (handle) cannot change once the agent exists (tests/organization/test_agent_handle.py).
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        cast["alyosha"].handle = "agent-alexei"
        with pytest.raises(ValidationError):
            cast["alyosha"].save()
    assert refreshes(callbacks) == []
    assert Agent.objects.filter(handle="agent-alexei").exists() is False


def test_clearing_a_worktree_refreshes(
    acme, cast, manifest_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        cast["ivan"].worktree_path = None
        cast["ivan"].save(update_fields=["worktree_path"])
    assert len(refreshes(callbacks)) == 1
    assert manifest(manifest_dir)[2]["worktree_path"] is None


def test_deleting_an_agent_refreshes(acme, cast, manifest_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        cast["smerdy"].delete()
    assert len(refreshes(callbacks)) == 1
    assert "agent-smerdy" not in [e["agent_id"] for e in manifest(manifest_dir)]


@pytest.mark.parametrize(
    "field, value",
    [
        ("is_paused", True),
        ("expertise", ["Cooking"]),
        ("workload_capacity", 3),
        ("system_prompt", "hi"),
    ],
)
def test_other_changes_schedule_nothing(
    acme, cast, manifest_dir, field, value, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        agent = Agent.objects.get(pk=cast["dmitri"].pk)
        setattr(agent, field, value)
        agent.save()
    assert refreshes(callbacks) == []


def test_a_save_with_unrelated_update_fields_schedules_nothing(
    acme, cast, manifest_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        cast["dmitri"].name = "changed but not saved"
        cast["dmitri"].save(update_fields=["is_paused"])
    assert refreshes(callbacks) == []


def test_one_transaction_refreshes_once_per_organization(
    acme, cast, other_org, manifest_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        with transaction.atomic():
            for agent in cast.values():
                agent.role = "renamed " + agent.role
                agent.save()
            make_agent(other_org, "agent-elsewhere")
    assert refreshes(callbacks) == [
        signals.ManifestRefresh(acme.pk),
        signals.ManifestRefresh(other_org.pk),
    ]


def test_a_change_rolled_back_in_a_savepoint_keeps_the_outer_refresh(
    acme, cast, manifest_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            try:
                with transaction.atomic():
                    cast["alyosha"].role = "doomed"
                    cast["alyosha"].save()
                    raise RuntimeError("roll back the savepoint")
            except RuntimeError:
                pass
            cast["dmitri"].role = "lead"
            cast["dmitri"].save()
    assert len(refreshes(callbacks)) == 1
    roles = {e["agent_id"]: e["role"] for e in manifest(manifest_dir)}
    assert roles["agent-dmitri"] == "lead"
    assert roles["agent-alyosha"] == "architect"


def test_nothing_is_scheduled_without_a_manifest_dir(
    acme, no_manifest_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        make_agent(acme, "agent-quiet")
    assert refreshes(callbacks) == []


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_change_writes_nothing(manifest_dir):
    from tests.factories import make_org

    org = make_org("rolled")
    make_agent(org, "agent-kept")
    assert [e["agent_id"] for e in manifest(manifest_dir, "rolled")] == ["agent-kept"]
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            make_agent(org, "agent-ghost")
            raise RuntimeError("roll back")
    assert [e["agent_id"] for e in manifest(manifest_dir, "rolled")] == ["agent-kept"]


@pytest.mark.django_db(transaction=True)
def test_a_committed_transaction_writes_the_file_once_it_commits(manifest_dir):
    from tests.factories import make_org

    org = make_org("committed")
    with transaction.atomic():
        make_agent(org, "agent-one")
        make_agent(org, "agent-two")
        assert manifest(manifest_dir, "committed") is None
    assert [e["agent_id"] for e in manifest(manifest_dir, "committed")] == [
        "agent-one",
        "agent-two",
    ]
