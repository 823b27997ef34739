"""`GET /healthz`: is the database reachable, is the broker reachable."""

from django.db import connection
from django.http import JsonResponse


def check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as exc:  # any failure means "not healthy", reported, not raised
        return f"error: {exc.__class__.__name__}"


def check_broker() -> str:
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return "ok"
    except Exception as exc:
        return f"error: {exc.__class__.__name__}"


def healthz(request):
    checks = {"database": check_database(), "broker": check_broker()}
    healthy = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "degraded", **checks}, status=200 if healthy else 503
    )
