"""`Idempotency-Key` on the POSTs that create: the same key and body answer the first answer again.

The key is stored in the write's own transaction, so a retry either replays the write or makes
it; another method, path or body with the key answers 422 `idempotency_key_reused`.
"""

import functools
import hashlib
import json
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.response import Response

from infrastructure.atomic import undone_whole
from infrastructure.errors import DomainError, Invalid
from infrastructure.renderers import json_bytes

from .caller import Caller
from .models import IdempotencyKey
from .serializers import ErrorSerializer

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255

# The schema of an idempotent operation: its header and its 422.
IDEMPOTENCY_KEY = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="Any unique string (e.g. a UUID), at most 255 visible ASCII characters: a retry "
    "with the same key and body answers the first answer again instead of writing twice.",
)
KEY_REUSED = {422: OpenApiResponse(ErrorSerializer, description="idempotency_key_reused")}


class KeyReused(DomainError):
    def __init__(self):
        super().__init__(
            f"This {HEADER} was first sent with another request (method, path or body): use a "
            "new key for a new request.",
            "idempotency_key_reused",
            422,
        )


def idempotent(view_method):
    """A DRF view method (of a CallerMixin view) that honours `Idempotency-Key`."""

    @functools.wraps(view_method)
    def handle(view, request, *args, **kwargs):
        key = request.headers.get(HEADER)
        if key is None:
            return view_method(view, request, *args, **kwargs)
        check_key(key)
        # Undone whole when anything in it fails: the key with the write it stands for.
        with undone_whole():
            stored, first = claim(caller=view.caller, key=key, fingerprint=fingerprint_of(request))
            if not first:
                return replay(stored)
            response = view_method(view, request, *args, **kwargs)
            remember(stored, response)
        return response

    return handle


def check_key(key: str) -> None:
    if not 0 < len(key) <= MAX_KEY_LENGTH or not all("!" <= c <= "~" for c in key):
        raise Invalid(f"{HEADER} must be 1 to {MAX_KEY_LENGTH} visible ASCII characters.")


def fingerprint_of(request) -> str:
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{request.method} {request.path_info}\n{body}".encode()).hexdigest()


def caller_of(caller: Caller) -> str:
    if caller.api_key is not None:
        return f"key:{caller.api_key.prefix}"
    return f"user:{caller.user.pk}"


def claim(*, caller: Caller, key: str, fingerprint: str) -> tuple[IdempotencyKey, bool]:
    """(the key's row, True) when this request is its first, or (the first answer, False).

    The organization's keys older than the window are deleted first: pruned as keys are used.
    """
    org, who = caller.organization, caller_of(caller)
    cutoff = timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_KEY_WINDOW_SECONDS)
    IdempotencyKey.objects.filter(organization=org, created_at__lt=cutoff).delete()
    try:
        with transaction.atomic():
            row = IdempotencyKey.objects.create(
                organization=org, caller=who, key=key, fingerprint=fingerprint, status=0
            )
        return row, True
    except IntegrityError:
        stored = IdempotencyKey.objects.get(organization=org, caller=who, key=key)
    if stored.fingerprint != fingerprint:
        raise KeyReused()
    return stored, False


def remember(row: IdempotencyKey, response) -> None:
    """Keep a successful answer for the key's retries; forget the key after any other."""
    if 200 <= response.status_code < 300:
        row.status = response.status_code
        row.body = json.loads(json_bytes(response.data))
        row.location = response.get("Location", "")
        row.save(update_fields=["status", "body", "location"])
    else:
        row.delete()


def replay(row: IdempotencyKey) -> Response:
    headers = {REPLAYED_HEADER: "true", **({"Location": row.location} if row.location else {})}
    return Response(row.body, status=row.status, headers=headers)
