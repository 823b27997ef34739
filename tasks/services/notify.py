"""The deciders hear of a decision by e-mail, with signed one-click links to the console.

A link opens a confirmation page after login; it is bound to the decision, the verb and the
user it was sent to, and works once: a decided decision takes no second verdict.
"""

from __future__ import annotations

import logging
from functools import partial

from django.conf import settings
from django.core import signing
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse

from ..decisions import describe
from ..models import DecisionKind, HumanDecision
from ..selectors import deciders_of

log = logging.getLogger(__name__)

LINK_SALT = "agent-org.decision-link"
VERBS = ("approve", "reject")


def link_token(decision: HumanDecision, verb: str, username: str) -> str:
    return signing.dumps({"d": decision.pk, "v": verb, "u": username}, salt=LINK_SALT)


def read_link_token(token: str, *, decision_id: int, verb: str, username: str) -> bool:
    """Whether `token` was signed for this decision, verb and user (and is not too old)."""
    try:
        data = signing.loads(token, salt=LINK_SALT, max_age=settings.DECISIONS_LINK_MAX_AGE)
    except signing.BadSignature:
        return False
    return data == {"d": decision_id, "v": verb, "u": username}


def link(decision: HumanDecision, verb: str, username: str) -> str:
    path = reverse("admin:tasks_humandecision_confirm", args=[decision.pk, verb])
    return f"{settings.PUBLIC_BASE_URL or 'http://localhost:8000'}{path}?t={link_token(decision, verb, username)}"


def _body(decision: HumanDecision, username: str, opening: str) -> str:
    lines = [
        opening,
        "",
        f"Asked by: {decision.requester_label}",
        f"Request: {describe(decision)}",
    ]
    if decision.reason:
        lines.append(f"Why it waits: {decision.reason}")
    if decision.task_id:
        lines.append(f"Task: #{decision.task_id}")
    if decision.expires_at:
        lines.append(f"Expires: {decision.expires_at:%Y-%m-%d %H:%M} UTC")
    lines.append("")
    if decision.kind == DecisionKind.APPROVAL:
        for verb in VERBS:
            lines.append(f"{verb.capitalize()}: {link(decision, verb, username)}")
    else:
        path = reverse("admin:tasks_humandecision_change", args=[decision.pk])
        lines.append(f"Answer: {settings.PUBLIC_BASE_URL or 'http://localhost:8000'}{path}")
    return "\n".join(lines)


def _send(decision_id: int, subject: str, opening: str) -> None:
    decision = HumanDecision.objects.select_related("policy", "requested_by").get(pk=decision_id)
    for user in deciders_of(decision):
        if not user.email:
            continue
        try:
            send_mail(
                subject,
                _body(decision, user.get_username(), opening),
                settings.DEFAULT_FROM_EMAIL,
                [user.email],
            )
        except Exception:
            # A mail server down loses no decision: it waits in the console all the same.
            log.exception("decision %s: the e-mail to %s failed", decision_id, user.email)


def deciders_asked(decision: HumanDecision) -> None:
    what = (
        "A move waits for your approval"
        if decision.kind == DecisionKind.APPROVAL
        else ("An agent asks you a question")
    )
    transaction.on_commit(
        partial(_send, decision.pk, f"[Agent Org] Decision #{decision.pk}: {what.lower()}", what),
        robust=True,
    )


def deciders_warned(decision: HumanDecision) -> None:
    opening = "This decision expires soon; without a decision it is applied as its policy says."
    transaction.on_commit(
        partial(_send, decision.pk, f"[Agent Org] Decision #{decision.pk} expires soon", opening),
        robust=True,
    )
