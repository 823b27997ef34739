from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from collaboration.demo import seed_demo_collaboration
from organization.demo import DEMO_AGENTS, seed_demo_organization
from routines.demo import seed_demo_routines
from tasks.demo import seed_demo_work

from ...demo import seed_demo_runtime


# Here, in the top app, because the demo spans them all: organization ← tasks ← collaboration
# ← routines ← runtime.
class Command(BaseCommand):
    help = (
        "Add whatever is missing of the demo organization of the seeds: its agents, their tasks "
        "(through the task services), a finished collaboration, a weekly routine and managed "
        "agents at work (on the offline provider, which they keep: no model is called). Never "
        "changes what exists."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", default="demo", help="Organization slug (default: demo)")

    def handle(self, *args, **options):
        try:
            org = seed_demo_organization(slug=options["org"])
        except ValidationError as exc:
            raise CommandError(f"--org {options['org']!r}: {' '.join(exc.messages)}") from exc
        work = seed_demo_work(org)
        session = seed_demo_collaboration(org)
        story = seed_demo_runtime(org)
        routine = seed_demo_routines(org)
        for title, why in work.skipped:
            self.stdout.write(f"Skipped the demo task {title!r}: {why}")
        added = len(work.added) + sum(x is not None for x in (session, story, routine))
        self.stdout.write(
            f"Organization '{org.slug}' ready with {len(DEMO_AGENTS)} agents"
            + (f"; added {added} demo item(s)." if added else "; nothing to add.")
        )
