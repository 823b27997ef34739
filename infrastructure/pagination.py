"""Limit/offset pages with a maximum size (API_MAX_PAGE_SIZE) and strict parameters."""

from urllib.parse import urlsplit

from django.conf import settings
from rest_framework import pagination

from .errors import Invalid
from .inputs import BIGINT_MAX
from .links import absolute_url


def _whole_number(request, name: str, minimum: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    number = int(raw) if raw.isascii() and raw.isdigit() else None
    if number is None or not minimum <= number <= BIGINT_MAX:
        raise Invalid(f"{name}: must be a whole number from {minimum} to {BIGINT_MAX}.", "invalid")
    return number


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """A `limit` above API_MAX_PAGE_SIZE is capped at it; one that is not a number, or does
    not fit a database integer, answers 400 `invalid` (DRF would ignore it, or fail in SQL)."""

    @property
    def max_limit(self) -> int:
        return settings.API_MAX_PAGE_SIZE

    @property
    def default_limit(self) -> int:
        return min(settings.REST_FRAMEWORK["PAGE_SIZE"], self.max_limit)

    def get_limit(self, request) -> int:
        limit = _whole_number(request, self.limit_query_param, 1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request) -> int:
        return _whole_number(request, self.offset_query_param, 0) or 0

    # A page's links are absolute URLs a client follows: built from PUBLIC_BASE_URL when set,
    # as every URL handed out, never from the request's Host and scheme (a TLS proxy's http).
    def get_next_link(self) -> str | None:
        return _public(super().get_next_link())

    def get_previous_link(self) -> str | None:
        return _public(super().get_previous_link())

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            schema = parameter["schema"]
            if parameter["name"] == self.limit_query_param:
                schema.update(minimum=1, maximum=BIGINT_MAX)
                parameter["description"] += f" At most {self.max_limit} are returned."
            else:
                schema.update(minimum=0, maximum=BIGINT_MAX)
        return parameters


def _public(url: str | None) -> str | None:
    if url is None or not settings.PUBLIC_BASE_URL:
        return url
    parts = urlsplit(url)
    return absolute_url(None, parts.path + (f"?{parts.query}" if parts.query else ""))
