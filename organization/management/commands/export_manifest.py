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
        parser.add_argument(
            "--org",
            help="Organization slug (default: the only organization, else demo, as seed_demo's)",
        )
        parser.add_argument("--out", help="File to write ('-' for stdout)")

    def handle(self, *args, **options):
        org = self._organization(options["org"])
        content = manifest_json(generate_manifest(org=org))
        out = options["out"]
        if out == "-":
            path = None
        elif out:
            path = Path(out)
        else:
            try:
                path = manifest_path(org)  # None without a manifest directory
            except ValueError as exc:  # a slug that is no path segment (an old seed_demo's)
                raise CommandError(str(exc)) from exc
        if path is None:
            self.stdout.write(content, ending="")
            return
        if path.is_dir():
            raise CommandError(f"{path} is a directory: --out takes the file to write.")
        try:
            write_atomically(path, content)
        except OSError as exc:
            raise CommandError(f"Cannot write {path}: {exc.strerror or exc}") from exc
        self.stderr.write(f"Wrote the manifest of {org.slug} to {path}")

    def _organization(self, slug: str | None) -> Organization:
        if slug is not None:
            org = Organization.objects.filter(slug=slug).first()
            if org is None:
                raise CommandError(f"Organization not found: {slug}")
            return org
        # docs/design.md names the command bare: the only organization, else the demo's.
        slugs = list(Organization.objects.order_by("slug").values_list("slug", flat=True)[:21])
        if len(slugs) == 1:
            return Organization.objects.get(slug=slugs[0])
        demo = Organization.objects.filter(slug="demo").first()
        if demo is not None:
            return demo
        if not slugs:
            raise CommandError("No organization yet: seed_demo makes one.")
        listed = ", ".join(slugs[:20]) + (", …" if len(slugs) > 20 else "")
        raise CommandError(f"Several organizations: name one with --org ({listed}).")
