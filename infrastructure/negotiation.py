"""The API's content negotiation: DRF's, answered at once for what nearly every client sends."""

from rest_framework.negotiation import DefaultContentNegotiation

# Accept headers (a missing one is */*) answered with the first renderer, in its media type: what
# DRF answers for them too when that renderer is JSON.
PLAIN = {"*/*", "application/json"}


class ContentNegotiation(DefaultContentNegotiation):
    """No format suffix, no `?format=`, and an Accept header of */* or application/json (or
    none): the first renderer (JSON), exactly as DRF would choose, without parsing the query
    string and the Accept header — ~10 % of an agent GET's CPU (bench/api.py). Anything else (a
    browser's Accept, `?format=api`, a media type with parameters such as `indent`) goes through
    DRF's negotiation."""

    def select_renderer(self, request, renderers, format_suffix=None):
        first = renderers[0] if renderers else None
        override = self.settings.URL_FORMAT_OVERRIDE
        if (
            format_suffix is None
            and first is not None
            and first.media_type == "application/json"
            and request.META.get("HTTP_ACCEPT", "*/*").strip() in PLAIN
            and not (override and override in request.META.get("QUERY_STRING", ""))
        ):
            return first, first.media_type
        return super().select_renderer(request, renderers, format_suffix)
