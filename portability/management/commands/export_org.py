from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from organization.models import Organization

from ...services import org_file


class Command(BaseCommand):
    help = (
        "Write an organization's settings — teams, agents (not their keys), hierarchy roles, team "
        "rules, budgets, approval policies, routines — as one agent-org JSON document "
        "(docs/operations.md). Stdout unless --out names a file."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", help="The organization's slug")
        parser.add_argument("--out", help="File to write (default: stdout)")

    def handle(self, *args, **options):
        org = Organization.objects.filter(slug=options["slug"]).first()
        if org is None:
            raise CommandError(f"Organization not found: {options['slug']}")
        content = org_file(org)
        if not options["out"] or options["out"] == "-":
            self.stdout.write(content, ending="")
            return
        path = Path(options["out"])
        if path.is_dir():
            raise CommandError(f"{path} is a directory: --out takes the file to write.")
        try:
            path.write_text(content, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot write {path}: {exc.strerror or exc}") from exc
        self.stderr.write(f"Wrote {org.slug} to {path}")
