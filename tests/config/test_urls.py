"""The URL conf lists the API's hottest paths first (Django tries patterns in order): that is
only safe while no pattern takes another's URLs. Each named route resolves to itself."""

import re

from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RoutePattern


def routes(patterns, prefix=""):
    """(example path, name) of every named route of path() syntax, recursively."""
    for entry in patterns:
        if not isinstance(entry.pattern, RoutePattern):
            continue  # the admin's regular expressions: its own, under admin/ only
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from routes(entry.url_patterns, route)
        elif isinstance(entry, URLPattern) and entry.name:
            yield re.sub(r"<(?:\w+:)?\w+>", "1", route), entry.name


def test_every_named_route_resolves_to_itself():
    found = list(routes(get_resolver().url_patterns))
    assert len(found) > 40
    for path, name in found:
        assert resolve("/" + path).url_name == name, path
