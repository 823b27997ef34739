import asyncio
import os

from django.core.management.base import BaseCommand, CommandError

from infrastructure import tracing
from organization.auth import authenticate_key
from organization.mcp_server.server import serve_stdio, stdio_configuration_problem


class Command(BaseCommand):
    help = (
        "Serve the MCP server on stdin/stdout (for hosts that launch a command, e.g. Claude "
        "Desktop), acting as the agent of --key (or $AGENT_ORG_KEY)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--key", help="An agent key (an organization key gets read-only tools)")

    def handle(self, *args, **options):
        tracing.setup()  # when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/observability.md)
        plaintext = options["key"] or os.environ.get("AGENT_ORG_KEY", "")
        if not plaintext:
            raise CommandError("Pass --key <agent key> or set AGENT_ORG_KEY.")
        problem = stdio_configuration_problem()
        if problem:
            raise CommandError(problem)
        if authenticate_key(plaintext) is None:
            raise CommandError("Invalid or revoked API key.")
        # stdout is the protocol channel: nothing else may be written to it. Every request
        # checks the key again (a key revoked while the host runs us is refused at once).
        asyncio.run(serve_stdio(plaintext))
