from django.core.management.base import BaseCommand, CommandError

from organization.models import Agent, ApiKey, Organization
from organization.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key and print it (and nothing else) on stdout. It is not shown again."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="Organization slug")
        parser.add_argument("--agent", help="Agent id (handle): an agent key; omit for an org key")
        parser.add_argument("--name", default="", help="A label for the key")

    def handle(self, *args, **options):
        org = Organization.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"Organization not found: {options['org']}")
        agent = None
        if options["agent"] is not None:
            # `--agent "$AGENT"` with the variable unset asked for an agent key: printing an
            # organization key (an administrator of the whole organization) instead is no answer.
            if not options["agent"].strip():
                raise CommandError(
                    "--agent is empty: give an agent id, or omit --agent for an organization key."
                )
            agent = Agent.objects.filter(organization=org, handle=options["agent"]).first()
            if agent is None:
                raise CommandError(f"Agent not found in {org.slug}: {options['agent']}")
        longest = ApiKey._meta.get_field("name").max_length
        if len(options["name"]) > longest:
            raise CommandError(f"--name is {len(options['name'])} characters; at most {longest}.")
        _, plaintext = api_key_create(organization=org, agent=agent, name=options["name"])
        self.stdout.write(plaintext)
