"""What fails before Django's own error handling can answer, answered as every error is:
`guarded(app)` wraps the WSGI application both servers run (config.wsgi, config.asgi)."""

import codecs
import json
import logging

from django.utils.http import parse_header_parameters

from infrastructure.errors import error_body

log = logging.getLogger("agent_org.http")


def guarded(app):
    def application(wsgi_environ, start_response):
        refusal = _unusable_charset(wsgi_environ.get("CONTENT_TYPE", ""))
        if refusal is not None:
            return _answer(start_response, "415 Unsupported Media Type", refusal)
        try:
            return app(wsgi_environ, start_response)
        except Exception:  # Django turns a view's exception into a response; this one escaped it
            log.exception("request failed before Django could answer it")
            body = error_body("Internal server error.", "server_error")
            return _answer(start_response, "500 Internal Server Error", body)

    return application


def _unusable_charset(content_type: str) -> dict | None:
    """A Content-Type Django cannot build the request from (parameters it cannot parse, a `charset`
    that is a codec but no text encoding), read with Django's own parser so that what is checked
    is what Django will use."""
    try:
        _, params = parse_header_parameters(content_type)
    except ValueError as exc:
        return error_body(f"Unreadable Content-Type: {exc}", "unsupported_media_type")
    charset = params.get("charset")
    if charset is None:
        return None
    try:
        if codecs.lookup(charset)._is_text_encoding:
            return None
    except LookupError:
        return None  # Django ignores a charset it does not know
    return error_body(f"Unsupported charset {charset!r}: send UTF-8.", "unsupported_media_type")


def _answer(start_response, status: str, body: dict) -> list[bytes]:
    payload = json.dumps(body).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
    )
    return [payload]
