"""Tasks in the admin: a product screen over the same services as the API, one module per model.

Staff see only the organizations they administer (organization/admin's `OrgOwnedAdmin`); moves
go through the services, so the rules hold here too; the audit trail is read-only.
"""

from .attention import Attention, register_attention
from .base import admin_actor
from .decisions import ApprovalPolicyAdmin, HumanDecisionAdmin
from .task import TaskAdmin
from .task_event import TaskEventAdmin
from .webhook_delivery import WebhookDeliveryAdmin

__all__ = [
    "ApprovalPolicyAdmin",
    "HumanDecisionAdmin",
    "Attention",
    "TaskAdmin",
    "TaskEventAdmin",
    "WebhookDeliveryAdmin",
    "admin_actor",
    "register_attention",
]
