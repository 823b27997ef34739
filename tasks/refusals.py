"""Refusals counted by code for `/metrics`: every door's refusal (infrastructure.errors.refused)."""

import logging

from django.db import connection

from organization.caller import resolve_caller

from . import sql

log = logging.getLogger(__name__)


def count_refusal(sender, error, request=None, caller=None, **kwargs) -> None:
    """Count the refusal for the caller's organization; never fails the answer it rides on."""
    try:
        if caller is None and request is not None:
            caller = resolve_caller(request)
        if caller is None or connection.needs_rollback:
            return  # no organization to count it for, or a transaction that must roll back
        sql.count_refusal(organization_id=caller.organization.pk, code=error.code)
    except Exception:
        log.exception("the refusal %s was not counted", getattr(error, "code", "?"))
