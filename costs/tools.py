"""The cost tools of the registry: the same services as REST, for call-tool and MCP."""

from organization.caller import Caller
from organization.registry import register_tool

from . import services
from .serializers import UsageRecordSerializer, UsageReportSerializer


@register_tool(
    "report_usage",
    "Report a model call you made yourself (provider, model, prompt and completion tokens, "
    "optionally the task it was for): it is priced, counted against your budgets and marked "
    "self-reported.",
    UsageReportSerializer,
    read_only=False,
)
def report_usage(caller: Caller, params: dict) -> dict:
    return UsageRecordSerializer(services.usage_report(caller=caller, **params)).data
