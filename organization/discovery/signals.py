"""The manifest refresh on commit when an expert's identity or worktree changes (seed 002).

A rolled-back change writes nothing; `QuerySet.update()` sends no signal, so code that
bulk-updates those fields calls `discovery.manifest.refresh_manifest(org_id)` itself.
"""

from dataclasses import dataclass

from django.db import transaction
from django.db.models.signals import post_delete, post_init, post_save
from django.dispatch import receiver

from ..models import Agent
from . import manifest

SNAPSHOT = "_manifest_snapshot"


def manifest_snapshot(agent: Agent) -> tuple:
    # __dict__, not getattr: reading a deferred field here would cost a query per instance.
    return tuple(agent.__dict__.get(field, SNAPSHOT) for field in manifest.MANIFEST_FIELDS)


@dataclass(frozen=True)
class ManifestRefresh:
    """The on-commit callback; an object so that one transaction schedules it once per org."""

    organization_id: int

    def __call__(self) -> None:
        manifest.refresh_manifest(self.organization_id)


def schedule_manifest_refresh(organization_id: int, using: str | None = None) -> None:
    """Refresh the manifest when the current transaction commits (at once in autocommit)."""
    if manifest.manifest_dir() is None:
        return
    connection = transaction.get_connection(using)
    refresh = ManifestRefresh(organization_id)
    current = set(connection.savepoint_ids)
    for savepoints, callback, _robust in connection.run_on_commit:
        # Already scheduled at this level or an outer one: it survives whatever this change does.
        if callback == refresh and set(savepoints) <= current:
            return
    transaction.on_commit(refresh, using=using, robust=True)


@receiver(post_init, sender=Agent, dispatch_uid="manifest_snapshot")
def remember_manifest_fields(sender, instance: Agent, **kwargs) -> None:
    setattr(instance, SNAPSHOT, manifest_snapshot(instance))


@receiver(post_save, sender=Agent, dispatch_uid="manifest_refresh_on_save")
def refresh_manifest_on_save(sender, instance: Agent, created: bool, update_fields=None, **kwargs):
    before = getattr(instance, SNAPSHOT, None)
    after = manifest_snapshot(instance)
    setattr(instance, SNAPSHOT, after)
    if kwargs.get("raw"):
        return
    if not created:
        if update_fields is not None and not set(update_fields) & set(manifest.MANIFEST_FIELDS):
            return
        if before == after and SNAPSHOT not in before:
            return
    schedule_manifest_refresh(instance.organization_id, kwargs.get("using"))


@receiver(post_delete, sender=Agent, dispatch_uid="manifest_refresh_on_delete")
def refresh_manifest_on_delete(sender, instance: Agent, **kwargs) -> None:
    schedule_manifest_refresh(instance.organization_id, kwargs.get("using"))
