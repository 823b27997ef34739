"""Approval policies, validated by the API's serializer and written by the tasks app's services.

Matched by name: the n-th policy of a name in the file is the n-th of that name in the
organization, oldest first (names need not be unique)."""

from decimal import Decimal, InvalidOperation

from organization.models import Organization
from tasks import services
from tasks.models import POLICY_FIELDS, ApprovalPolicy
from tasks.serializers.decisions import ApprovalPolicySerializer

from .base import Context, Entry
from .budgets import usd


def _exported(policy: ApprovalPolicy) -> dict:
    row = {name: getattr(policy, name) for name in POLICY_FIELDS}
    row["team"] = policy.team.name if policy.team_id else None
    row["agent"] = policy.agent.handle if policy.agent_id else None
    if policy.cost_above_usd is not None:
        row["cost_above_usd"] = usd(policy.cost_above_usd)
    return row


def export_policies(org: Organization) -> list[dict]:
    policies = ApprovalPolicy.objects.filter(organization=org).select_related("team", "agent")
    return [_exported(policy) for policy in policies.order_by("name", "pk")]


def policy_canonical(item: dict) -> dict:
    if item.get("cost_above_usd") is None:
        return item
    try:
        return item | {"cost_above_usd": usd(Decimal(item["cost_above_usd"]))}
    except (InvalidOperation, TypeError, ValueError):
        return item


def apply_policy(context: Context, entry: Entry) -> None:
    policy = None
    if not entry.is_new:
        named = ApprovalPolicy.objects.filter(organization=context.org, name=entry.item["name"])
        policy = named.order_by("pk")[entry.occurrence - 1]
    body = ApprovalPolicySerializer(
        policy, data=entry.item, partial=policy is not None, context={"caller": context.caller}
    )
    body.is_valid(raise_exception=True)
    if policy is None:
        services.policy_create(org=context.org, **body.validated_data)
    else:
        services.policy_update(policy=policy, **body.validated_data)
