"""Approval policies: a human writes them; the organization's flag says whether any is on."""

from __future__ import annotations

from django.db.models import Exists, OuterRef

from infrastructure.atomic import atomic
from organization.models import Organization

from ..models import ApprovalPolicy


def refresh_gate_flag(org_id: int) -> None:
    """Keep `Organization.has_approval_policies` true exactly while an enabled policy exists."""
    enabled = ApprovalPolicy.objects.filter(organization_id=OuterRef("pk"), enabled=True)
    Organization.objects.filter(pk=org_id).update(has_approval_policies=Exists(enabled))


@atomic
def policy_create(*, org: Organization, **fields) -> ApprovalPolicy:
    policy = ApprovalPolicy(organization=org, **fields)
    policy.full_clean()
    policy.save()
    refresh_gate_flag(org.pk)
    return policy


@atomic
def policy_update(*, policy: ApprovalPolicy, **fields) -> ApprovalPolicy:
    for name, value in fields.items():
        setattr(policy, name, value)
    policy.full_clean()
    policy.save()
    refresh_gate_flag(policy.organization_id)
    return policy


@atomic
def policy_delete(*, policy: ApprovalPolicy) -> None:
    org_id = policy.organization_id
    policy.delete()
    refresh_gate_flag(org_id)
