"""Seed 002's runtime status: reported by API or status file; pending → idle, else busy."""

import os
import time

import pytest

from organization.discovery.status import runtime_status_of, status_file
from organization.models import Agent

pytestmark = pytest.mark.django_db


def report(client, status):
    return client.post("/api/agents/me/status", {"status": status}, format="json")


def write_status(org, agent, content, mtime=None):
    path = status_file(org, agent.pk)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


@pytest.mark.parametrize(
    "sent, stored, status",
    [
        ("pending", "pending", "idle"),
        ("processing", "processing", "busy"),
        ("  pending\n", "pending", "idle"),
    ],
)
def test_an_agent_reports_its_status(
    acme, cast, agent_client, no_manifest_dir, sent, stored, status
):
    response = report(agent_client(cast["dmitri"]), sent)
    assert response.status_code == 200
    body = response.json()
    assert body["agent_id"] == "agent-dmitri"
    assert body["expert_id"] == cast["dmitri"].pk
    assert body["runtime_status"] == stored
    assert body["status"] == status
    assert Agent.objects.get(pk=cast["dmitri"].pk).runtime_status == stored


@pytest.mark.parametrize("sent", ["idle", "", "PENDING", "done"])
def test_an_unknown_status_is_400(acme, cast, agent_client, no_manifest_dir, sent):
    response = report(agent_client(cast["dmitri"]), sent)
    assert response.status_code == 400
    assert response.json()["code"] in ("invalid_status", "invalid")


def test_an_organization_key_cannot_report_a_status(acme, org_client):
    response = report(org_client(acme), "pending")
    assert response.status_code == 403
    assert response.json()["code"] == "agent_required"


def test_a_report_is_mirrored_to_the_status_file(
    acme, cast, agent_client, manifest_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        report(agent_client(cast["dmitri"]), "processing")
    path = manifest_dir / "acme" / "status" / f"expert{cast['dmitri'].pk}"
    assert path.read_text().strip() == "processing"


@pytest.mark.parametrize(
    "content, status",
    [
        ("pending", "idle"),
        ("pending\n", "idle"),
        ("  pending  ", "idle"),
        ("processing", "busy"),
        ("", "busy"),
        ("garbage", "busy"),
        ("Pending", "busy"),
    ],
)
def test_a_status_file_maps_to_idle_or_busy(acme, cast, manifest_dir, content, status):
    write_status(acme, cast["ivan"], content)
    assert runtime_status_of(cast["ivan"]).status == status


def test_a_missing_status_is_busy(acme, cast, manifest_dir):
    assert runtime_status_of(cast["ivan"]).status == "busy"


def test_a_missing_status_without_a_manifest_dir_is_busy(acme, cast, no_manifest_dir):
    assert runtime_status_of(cast["ivan"]).status == "busy"


def test_an_unreadable_status_file_is_busy(acme, cast, manifest_dir):
    path = write_status(acme, cast["ivan"], "pending")
    path.unlink()
    path.mkdir()  # a directory where the file should be cannot be read as one
    assert runtime_status_of(cast["ivan"]).status == "busy"


def test_the_last_written_status_wins(acme, cast, agent_client, manifest_dir):
    """Property 3: the last written value at read time, whichever way it was written."""
    ivan = cast["ivan"]
    report(agent_client(ivan), "processing")
    write_status(acme, ivan, "pending", mtime=time.time() + 5)
    ivan.refresh_from_db()
    assert runtime_status_of(ivan).value == "pending"
    write_status(acme, ivan, "pending", mtime=time.time() - 3600)
    assert runtime_status_of(ivan).value == "processing"


def test_an_organization_whose_slug_is_no_path_segment_has_statuses_from_the_api_only(
    acme, cast, agent_client, org_client, manifest_dir
):
    """A stored slug that is no slug (`..`, `a/b`: an old seed_demo's) gets no files under the
    manifest directory; discovery still answers, with the statuses reported over the API and
    the seed's relative default paths in the prompt (never a 500)."""
    from organization.models import Organization

    Organization.objects.filter(pk=acme.pk).update(slug="acme/../x")
    ivan = agent_client(cast["ivan"])
    reported = report(ivan, "pending")
    assert (reported.status_code, reported.json()["status"]) == (200, "idle")
    experts = agent_client(cast["grusha"]).get("/api/experts")
    assert experts.status_code == 200
    assert [(e["agent_id"], e["status"]) for e in experts.json()["experts"]] == [
        ("agent-ivan", "idle")
    ]
    card = org_client(acme).get("/api/agents/agent-ivan/card")
    assert card.status_code == 200
    prompt = ivan.get("/api/agents/agent-ivan/discovery-prompt")
    assert prompt.status_code == 200
    assert prompt.json()["manifest_path"] == ".agent-org/experts_manifest.json"
    assert not manifest_dir.exists() or not any(manifest_dir.rglob("*"))
