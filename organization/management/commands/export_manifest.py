from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from organization.discovery.manifest import (
    generate_manifest,
    manifest_json,
    manifest_path,
    write_atomically,
)
from organization.models import Organization


class Command(BaseCommand):
    help = (
        "Write seed 002's expert manifest of an organization: a JSON array of "
        "{expert_id, name, role, worktree_path, agent_id}, sorted by expert_id, written "
        "atomically. Default: the file under AGENT_ORG_MANIFEST_DIR, else stdout."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="Organization slug")
        parser.add_argument("--out", help="File to write ('-' for stdout)")

    def handle(self, *args, **options):
        org = Organization.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"Organization not found: {options['org']}")
        content = manifest_json(generate_manifest(org=org))
        out = options["out"]
        if out == "-":
            path = None
        elif out:
            path = Path(out)
        else:
            path = manifest_path(org)  # None without a manifest directory
        if path is None:
            self.stdout.write(content, ending="")
            return
        write_atomically(path, content)
        self.stderr.write(f"Wrote the manifest of {org.slug} to {path}")
