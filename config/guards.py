"""What fails before Django's own error handling can answer, answered as every error is.

Django builds the request before its middleware and exception handling run: a request that
breaks that step escaped to the server, which answered its own text/plain 500 (uvicorn) or
none at all. `guarded(app)` wraps the WSGI application both servers run (config.wsgi for
gunicorn, config.asgi for `python -m config.serve`).
"""

import codecs
import json
import logging

from organization.errors import error_body

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
    """A `charset` that names a codec but not a text encoding (`rot13`, `base64`): Django takes
    it as the request's encoding and fails decoding the query string with it."""
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() != "charset":
            continue
        charset = value.strip().strip('"')
        try:
            if codecs.lookup(charset)._is_text_encoding:
                return None
        except LookupError:
            return None  # Django ignores a charset it does not know
        return error_body(f"Unsupported charset {charset!r}: send UTF-8.", "unsupported_media_type")
    return None


def _answer(start_response, status: str, body: dict) -> list[bytes]:
    payload = json.dumps(body).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
    )
    return [payload]
