from django.core.management.base import BaseCommand

from organization.demo import DEMO_AGENTS, seed_demo


class Command(BaseCommand):
    help = "Create (idempotently) the demo organization of the seeds."

    def add_arguments(self, parser):
        parser.add_argument("--org", default="demo", help="Organization slug (default: demo)")

    def handle(self, *args, **options):
        org = seed_demo(slug=options["org"])
        self.stdout.write(f"Organization '{org.slug}' ready with {len(DEMO_AGENTS)} agents.")
