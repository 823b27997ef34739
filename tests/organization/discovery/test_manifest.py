"""Seed 002's manifest generator and writer (its manifest.rs test table), and export_manifest."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from organization.discovery.manifest import (
    generate_manifest,
    manifest_json,
    manifest_path,
    write_manifest,
)
from organization.models import AgentRole, Organization
from tests.factories import make_agent, make_org

pytestmark = pytest.mark.django_db


def test_generate_manifest_empty_config(acme, no_manifest_dir):
    assert generate_manifest(org=acme) == []
    assert manifest_json(generate_manifest(org=acme)).strip() == "[]"


def test_generate_manifest_includes_all_experts(acme, cast, no_manifest_dir):
    cast["dmitri"].is_paused = True
    cast["dmitri"].save()
    manifest = generate_manifest(org=acme)
    assert [e["agent_id"] for e in manifest] == [
        "agent-alyosha",
        "agent-dmitri",
        "agent-ivan",
        "agent-grusha",
        "agent-smerdy",
    ]
    assert [e["expert_id"] for e in manifest] == sorted(a.pk for a in cast.values())
    assert manifest[0] == {
        "expert_id": cast["alyosha"].pk,
        "name": "Alyosha",
        "role": "architect",
        "worktree_path": None,
        "agent_id": "agent-alyosha",
    }


def test_generate_manifest_is_sorted_by_a_stable_expert_id(acme, cast, no_manifest_dir):
    before = {e["agent_id"]: e["expert_id"] for e in generate_manifest(org=acme)}
    cast["alyosha"].name = "Alexei"
    cast["alyosha"].save()
    make_agent(acme, "agent-aaa")  # sorts first by handle, last by expert_id
    after = generate_manifest(org=acme)
    assert {e["agent_id"]: e["expert_id"] for e in after if e["agent_id"] in before} == before
    assert after[-1]["agent_id"] == "agent-aaa"
    assert [e["expert_id"] for e in after] == sorted(e["expert_id"] for e in after)


def test_generate_manifest_includes_worktree_paths(acme, cast, no_manifest_dir):
    paths = {e["agent_id"]: e["worktree_path"] for e in generate_manifest(org=acme)}
    assert paths == {
        "agent-alyosha": None,
        "agent-dmitri": None,
        "agent-ivan": "/repo/wt-1",
        "agent-grusha": "/repo/wt-1",
        "agent-smerdy": "/repo/wt-2",
    }


def test_generate_manifest_uses_session_roles(acme, cast, no_manifest_dir):
    """The current job title, not the one the agent was created with."""
    cast["dmitri"].role = "release manager"
    cast["dmitri"].save()
    AgentRole.objects.create(agent=cast["ivan"], role="supervisor")
    roles = {e["agent_id"]: e["role"] for e in generate_manifest(org=acme)}
    assert roles["agent-dmitri"] == "release manager"
    assert roles["agent-ivan"] == "reviewer"


def test_generate_manifest_is_valid_json(acme, cast, no_manifest_dir):
    cast["ivan"].name = 'Ivan "the \\ quoted" Фёдорович'
    cast["ivan"].save()
    parsed = json.loads(manifest_json(generate_manifest(org=acme)))
    assert isinstance(parsed, list)
    assert parsed[2]["name"] == 'Ivan "the \\ quoted" Фёдорович'
    assert set(parsed[0]) == {"expert_id", "name", "role", "worktree_path", "agent_id"}


def test_generate_manifest_never_shows_another_organization(acme, cast, other_org):
    make_agent(other_org, "agent-outsider")
    assert "agent-outsider" not in {e["agent_id"] for e in generate_manifest(org=acme)}


def test_write_manifest_creates_file(acme, cast, tmp_path, no_manifest_dir):
    path = tmp_path / "deep" / "experts_manifest.json"
    assert write_manifest(org=acme, path=path) == path
    assert json.loads(path.read_text()) == generate_manifest(org=acme)


def test_write_manifest_overwrites_existing(acme, cast, tmp_path, no_manifest_dir):
    path = tmp_path / "experts_manifest.json"
    path.write_text('[{"stale": true}]')
    write_manifest(org=acme, path=path)
    assert json.loads(path.read_text()) == generate_manifest(org=acme)


def test_write_manifest_replaces_the_file_atomically(acme, cast, tmp_path, no_manifest_dir):
    """A temp file renamed over the old one: a reader holding the old file sees it whole."""
    path = tmp_path / "experts_manifest.json"
    write_manifest(org=acme, path=path)
    with path.open() as reader:
        old_inode = path.stat().st_ino
        cast["ivan"].worktree_path = None
        cast["ivan"].save()
        write_manifest(org=acme, path=path)
        assert json.loads(reader.read())[2]["worktree_path"] == "/repo/wt-1"
    assert path.stat().st_ino != old_inode
    assert json.loads(path.read_text())[2]["worktree_path"] is None
    assert [p.name for p in tmp_path.iterdir()] == ["experts_manifest.json"]


def test_an_unchanged_manifest_is_not_rewritten(acme, cast, tmp_path, no_manifest_dir):
    path = tmp_path / "experts_manifest.json"
    write_manifest(org=acme, path=path)
    inode = path.stat().st_ino
    assert write_manifest(org=acme, path=path) is None
    assert path.stat().st_ino == inode


def test_export_manifest_writes_the_file_given(acme, cast, tmp_path, no_manifest_dir):
    out = tmp_path / "m.json"
    call_command("export_manifest", "--org", "acme", "--out", str(out), stderr=StringIO())
    assert json.loads(out.read_text()) == generate_manifest(org=acme)


def test_export_manifest_defaults_to_the_manifest_dir(acme, cast, manifest_dir):
    call_command("export_manifest", "--org", "acme", stderr=StringIO())
    written = json.loads((manifest_dir / "acme" / "experts_manifest.json").read_text())
    assert len(written) == 5


def test_export_manifest_prints_without_a_dir(acme, no_manifest_dir):
    out = StringIO()
    call_command("export_manifest", "--org", "acme", stdout=out)
    assert json.loads(out.getvalue()) == []


def test_export_manifest_to_dash_prints_even_with_a_dir(acme, cast, manifest_dir):
    out = StringIO()
    call_command("export_manifest", "--org", "acme", "--out", "-", stdout=out)
    assert json.loads(out.getvalue()) == generate_manifest(org=acme)
    assert not (manifest_dir / "acme" / "experts_manifest.json").exists()


def test_export_manifest_named_bare_exports_the_only_organization_else_the_demo(
    acme, cast, no_manifest_dir
):
    """docs/design.md names `export_manifest` without flags."""
    out = StringIO()
    call_command("export_manifest", stdout=out)
    assert json.loads(out.getvalue()) == generate_manifest(org=acme)
    make_org("other")
    with pytest.raises(
        CommandError, match=r"Several organizations: name one with --org \(acme, other\)"
    ):
        call_command("export_manifest")
    demo = make_org("demo")
    out = StringIO()
    call_command("export_manifest", stdout=out)
    assert json.loads(out.getvalue()) == generate_manifest(org=demo)


def test_export_manifest_of_an_unknown_org_fails(db, no_manifest_dir):
    with pytest.raises(CommandError, match="Organization not found: nope"):
        call_command("export_manifest", "--org", "nope")


def test_export_manifest_to_a_directory_is_refused_with_a_message(acme, tmp_path, no_manifest_dir):
    """--out names the file: a directory there is a CommandError, not os.replace's traceback."""
    with pytest.raises(CommandError, match="is a directory"):
        call_command("export_manifest", "--org", "acme", "--out", str(tmp_path))


def test_export_manifest_to_an_unwritable_place_is_refused_with_a_message(
    acme, tmp_path, no_manifest_dir
):
    """A parent that is a file (or any OSError of the write) becomes a CommandError."""
    (tmp_path / "file").write_text("")
    with pytest.raises(CommandError, match="Cannot write"):
        call_command("export_manifest", "--org", "acme", "--out", str(tmp_path / "file" / "m.json"))


@pytest.mark.parametrize("slug", ["..", "../../tmp/elsewhere", ""])
def test_an_organization_whose_slug_is_no_slug_gets_no_files_outside_the_manifest_dir(
    acme, manifest_dir, slug
):
    """AGENT_ORG_MANIFEST_DIR/<slug> is built only from a real slug: `..` or `/` in a stored
    slug (made before seed_demo checked its --org) would lead the files out of the directory."""
    Organization.objects.filter(pk=acme.pk).update(slug=slug)
    acme.refresh_from_db()
    with pytest.raises(ValueError, match="is not a slug"):
        manifest_path(acme)
    with pytest.raises(CommandError, match="is not a slug"):
        call_command("export_manifest", "--org", slug)
