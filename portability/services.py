"""An organization as one JSON document, and back: `org_export` and `org_import`.

The import writes every item through its app's service in one transaction: a refused item
(named by its section, position and name) leaves nothing written, and a dry run rolls back
whatever it did. It adds and changes; it never removes what the file does not list.
"""

import json
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from rest_framework.exceptions import ValidationError as SerializerError

from infrastructure.errors import DomainError
from organization.caller import caller_for_command, caller_for_member
from organization.history import acting_as
from organization.models import Organization

from . import document as doc
from .sections import SECTIONS, Context, Entry, Section
from .sections.people import MAX_CARDS_PER_IMPORT, cards_to_fetch, fetch_cards

ORGANIZATION_SETTINGS = ("name", "webhook_url")


def org_export(org: Organization) -> dict:
    """The organization's settings as an agent-org document (no secrets, no work, no ids)."""
    document = {
        "format": doc.FORMAT,
        "version": doc.VERSION,
        "exported_at": timezone.now().isoformat(),
        "organization": {"slug": org.slug, "name": org.name, "webhook_url": org.webhook_url},
    }
    for section in SECTIONS:
        items = section.export(org)
        document[section.name] = items[0] if section.single else items
    return document


def org_file(org: Organization) -> str:
    """The export as the file's text."""
    return json.dumps(org_export(org), indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class Change:
    """One item the import creates or changes: its fields with their value before and after."""

    label: str
    key: str
    action: str  # "create" or "update"
    fields: dict

    def __str__(self) -> str:
        said = f"{self.action} {self.label}" + (f" {self.key}" if self.key else "")
        if self.action == "create":
            return said
        changed = ", ".join(
            f"{name}: {_shown(before)} → {_shown(after)}"
            for name, (before, after) in self.fields.items()
        )
        return f"{said}: {changed}"


def _shown(value) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "…"


@dataclass
class ImportReport:
    organization: Organization
    dry_run: bool
    changes: list[Change] = field(default_factory=list)
    unchanged: int = 0

    def summary(self) -> str:
        created = sum(1 for c in self.changes if c.action == "create")
        updated = len(self.changes) - created
        done = "would be" if self.dry_run else "were"
        return (
            f"{self.organization.slug}: {created} item(s) {done} created, {updated} changed, "
            f"{self.unchanged} unchanged."
            + (" Dry run: nothing was written." if self.dry_run else "")
        )


def target_slug(document: dict, as_slug: str | None = None) -> str:
    """The organization a checked document goes to: `as_slug`, else the one it names."""
    return as_slug or document["organization"]["slug"]


def org_import(
    document: dict, *, as_slug: str | None = None, user=None, dry_run: bool = False
) -> ImportReport:
    """Create or update the organization the document describes (or `as_slug`), as `user` (None:
    a management command). Refused (`document.Refused`) with nothing written if any item is."""
    doc.check(document)
    slug = target_slug(document, as_slug)
    urls = cards_to_fetch(
        Organization.objects.filter(slug=slug).first(), document.get("agents", [])
    )
    if len(urls) > MAX_CARDS_PER_IMPORT:
        raise doc.Refused(
            f"agents: the file would have {len(urls)} remote A2A agents' cards fetched; an import "
            f"fetches at most {MAX_CARDS_PER_IMPORT} (import the file in parts)."
        )
    cards = fetch_cards(urls)
    with transaction.atomic():
        org = Organization.objects.select_for_update().filter(slug=slug).first()
        report = ImportReport(organization=org, dry_run=dry_run)
        exists = org is not None
        org = _organization(report, org, slug, document["organization"])
        caller = caller_for_member(user, org) if user is not None else caller_for_command(org)
        context = Context(caller=caller, document=document, cards=cards)
        with acting_as(caller):
            for section in SECTIONS:
                if section.name in document:
                    _import_section(context, section, report, exists)
        if dry_run:
            transaction.set_rollback(True)
    return report


def _organization(report: ImportReport, org, slug: str, item: dict) -> Organization:
    given = {name: item[name] for name in ORGANIZATION_SETTINGS if name in item}
    if org is None:
        org = Organization(slug=slug, name=given.pop("name", slug))
        report.changes.append(Change("organization", slug, "create", {}))
    changed = {
        name: (getattr(org, name), value)
        for name, value in given.items()
        if getattr(org, name) != value
    }
    if org.pk is not None and changed:
        report.changes.append(Change("organization", slug, "update", changed))
    for name, value in given.items():
        setattr(org, name, value)
    try:
        org.full_clean()
    except ValidationError as exc:
        raise doc.Refused(f"organization: {doc.reason(exc)}") from exc
    org.save()
    report.organization = org
    return org


def _import_section(context: Context, section: Section, report: ImportReport, exists: bool):
    given = context.document[section.name]
    items = [given] if section.single else given
    before = _keyed(section, section.export(context.org)) if exists else {}
    entries = []
    for entry in _entries(section, items):
        entry = Entry(entry.index, entry.key, entry.item, before.get(entry.key), entry.occurrence)
        change = _change(section, entry)
        if change is None:
            report.unchanged += 1
            continue
        report.changes.append(change)
        _apply(section, section.apply, context, entry)
        entries.append(entry)
    if section.finish is not None:
        for entry in entries:
            _apply(section, section.finish, context, entry)


def _entries(section: Section, items: list[dict]) -> list[Entry]:
    """The items with their names; two of one name are refused unless the kind repeats names."""
    seen: dict[str, int] = {}
    entries = []
    for index, item in enumerate(items):
        item = section.canonical(item)
        key = section.key(item)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1 and not section.repeatable:
            raise doc.Refused(f"{_where(section, index, key)}: listed twice.")
        occurrence = seen[key]
        name = key if occurrence == 1 else f"{key} #{occurrence}"
        entries.append(Entry(index, name, item, None, occurrence))
    return entries


def _keyed(section: Section, items: list[dict]) -> dict[str, dict]:
    return {entry.key: entry.item for entry in _entries(section, items)}


def _change(section: Section, entry: Entry) -> Change | None:
    if entry.is_new:
        return Change(section.label, entry.key, "create", {})
    fields = {}
    for name, value in entry.item.items():
        if name in section.key_fields:
            continue
        before = entry.before.get(name)
        after = (
            {**before, **value} if isinstance(before, dict) and isinstance(value, dict) else value
        )
        if before != after:
            fields[name] = (before, after)
    if not fields:
        return None
    return Change(section.label, entry.key, "update", fields)


def _apply(section: Section, step, context: Context, entry: Entry) -> None:
    try:
        step(context, entry)
    except (DomainError, ValidationError, SerializerError) as exc:
        raise doc.Refused(f"{_where(section, entry.index, entry.key)}: {doc.reason(exc)}") from exc


def _where(section: Section, index: int, key: str) -> str:
    if section.single:
        return section.name
    return f"{section.name}[{index}]" + (f" ({key})" if key else "")
