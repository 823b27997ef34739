"""Beat's sweep of lost sessions (collaboration.sweep_sessions, every COLLAB_SWEEP_SECONDS); it
queues the run by the task's name through the outbox, so it imports no Celery task module.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from infrastructure import outbox

from .models import CollaborationSession, SessionStatus

log = logging.getLogger(__name__)

RUN_SESSION_TASK = "collaboration.run_session"
SWEEP_BATCH = 500


def sweep_sessions() -> list:
    """Send again the sessions a worker lost: running with a stale heartbeat, or queued and not sent
    for a lease. A second delivery is always safe; each is sent at most once a lease. Returns the
    ids sent."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.COLLAB_LEASE_SECONDS)
    running = [SessionStatus.RUNNING, SessionStatus.SYNTHESIZING]
    lost = CollaborationSession.objects.filter(
        Q(status__in=running, heartbeat_at__lt=stale)
        | Q(status=SessionStatus.QUEUED, created_at__lt=stale),
        Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=stale),
    )
    with transaction.atomic():
        ids = list(
            lost.order_by("pk")
            .select_for_update(skip_locked=True)
            .values_list("pk", flat=True)[:SWEEP_BATCH]
        )
        CollaborationSession.objects.filter(pk__in=ids).update(dispatched_at=now)
        outbox.enqueue_many(RUN_SESSION_TASK, [[str(pk)] for pk in ids])
    if ids:
        log.warning("collaboration sweep sent again %d lost session(s): %s", len(ids), ids)
    return ids
