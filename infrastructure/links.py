"""Absolute URLs the service hands out (A2A cards, Location headers, session links).

One place builds them: from PUBLIC_BASE_URL when it is set, so a forged `Host` header can never
end up in a URL another client follows; otherwise from the request, whose Host Django has
already checked against ALLOWED_HOSTS.
"""

from django.conf import settings


def absolute_url(request, path: str = "/") -> str:
    """`path` (starting with /) as an absolute URL; the bare path without a request."""
    if settings.PUBLIC_BASE_URL:
        return settings.PUBLIC_BASE_URL.rstrip("/") + path
    if request is None:
        return path
    return request.build_absolute_uri(path)
