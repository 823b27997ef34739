"""config.guards: what fails before Django's own error handling answers as every error does, on
both servers (`python -m config.serve` and gunicorn's config.wsgi)."""

import io
import json
from wsgiref.util import setup_testing_defaults

import pytest

from config.asgi import build_asgi_application
from config.guards import guarded
from tests.factories import make_key, make_org
from tests.organization.mcp.live import LiveServer, raw_http

pytestmark = pytest.mark.django_db(transaction=True)

NOT_TEXT = [
    "rot13",
    "base64",
    "zlib_codec",
]  # codecs, but of bytes: Django failed decoding with them


@pytest.mark.parametrize("charset", NOT_TEXT)
def test_a_charset_that_is_no_text_encoding_is_refused_as_json_by_the_server(charset):
    headers = {
        "Authorization": f"Bearer {make_key(make_org())}",
        "Content-Type": f"text/plain; charset={charset}",
    }
    with LiveServer(build_asgi_application()) as server, raw_http(server.url) as http:
        refused = http.get("/api/agents?limit=5", headers=headers)
        admin = http.get("/admin/?q=1", headers=headers)
        fine = http.get(
            "/api/agents?limit=5",
            headers={**headers, "Content-Type": "text/plain; charset=latin-1"},
        )
    for response in (refused, admin):
        assert response.status_code == 415
        assert response.headers["content-type"] == "application/json"
        assert response.json() == {
            "success": False,
            "error": f"Unsupported charset {charset!r}: send UTF-8.",
            "code": "unsupported_media_type",
        }
    assert fine.status_code == 200


def wsgi_get(app, path: str, query: str, content_type: str):
    environ = {
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "CONTENT_TYPE": content_type,
        "wsgi.input": io.BytesIO(b""),
        "HTTP_HOST": "localhost",
    }
    setup_testing_defaults(environ)
    started = []
    body = b"".join(app(environ, lambda status, headers, exc_info=None: started.append(status)))
    return started[0], body


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain; charset=utf-8; charset=rot13",  # Django keeps the last of repeated parameters
        "text/plain; charset*=utf-8''rot13",  # RFC 2231
        'text/plain; x="a;charset=utf-8"; charset=rot13',  # a quoted ";"
        "text/plain; charset*=bogus''x",  # Django's parser refuses it: no request could be built
    ],
)
def test_the_charset_is_read_as_django_reads_it(content_type):
    from config.wsgi import application

    status, body = wsgi_get(application, "/api/agents", "limit=5", content_type)
    assert status == "415 Unsupported Media Type"
    assert json.loads(body)["code"] == "unsupported_media_type"


def test_gunicorns_application_refuses_it_too():
    from config.wsgi import application

    status, body = wsgi_get(application, "/api/agents", "limit=5", "text/plain; charset=rot13")
    assert status == "415 Unsupported Media Type"
    assert json.loads(body)["code"] == "unsupported_media_type"
    status, _ = wsgi_get(application, "/api/agents", "limit=5", "text/plain; charset=utf-8")
    assert status.startswith("401")  # no key: Django answered


def test_an_exception_that_escapes_django_is_a_json_500():
    def broken(environ, start_response):
        raise LookupError("before any middleware")

    status, body = wsgi_get(guarded(broken), "/api/agents", "", "")
    assert status == "500 Internal Server Error"
    assert json.loads(body) == {
        "success": False,
        "error": "Internal server error.",
        "code": "server_error",
    }
