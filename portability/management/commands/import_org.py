import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ...document import Refused, parse
from ...services import org_import


class Command(BaseCommand):
    help = (
        "Create or update an organization from an agent-org JSON file (`export_org` writes one): "
        "every item through the services, in one transaction, nothing written if one is refused. "
        "Agents are matched by id; nothing the file does not list is removed."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="The agent-org file ('-' for stdin)")
        parser.add_argument(
            "--as", dest="as_slug", help="Import as this organization (default: the file's slug)"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Print the changes and write nothing"
        )

    def handle(self, *args, **options):
        try:
            document = parse(self._read(options["file"]))
            report = org_import(document, as_slug=options["as_slug"], dry_run=options["dry_run"])
        except Refused as exc:
            raise CommandError(exc.message) from exc
        for change in report.changes:
            self.stdout.write(str(change))
        self.stdout.write(report.summary())

    @staticmethod
    def _read(name: str) -> bytes:
        if name == "-":
            return sys.stdin.buffer.read()
        try:
            return Path(name).read_bytes()
        except OSError as exc:
            raise CommandError(f"Cannot read {name}: {exc.strerror or exc}") from exc
