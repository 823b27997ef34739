"""The API's JSON renderer: orjson, several times faster than the standard library's encoder
on large bodies such as a 10,000-agent roster (bench/roster.py), with DRF's output.

What orjson does not encode natively (Decimal, lazy translations, timedelta, querysets ...)
goes through DRF's own encoder, so every value renders as it did with DRF's JSONRenderer.
"""

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

_drf_encoder = JSONEncoder()
# UTC as "Z", as DRF's encoder writes it; int dict keys become strings, as json.dumps does.
_OPTIONS = orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS


def json_bytes(data) -> bytes:
    """`data` as DRF would render it, compact, UTF-8: the API's bodies and MCP's tool texts."""
    return orjson.dumps(data, default=_drf_encoder.default, option=_OPTIONS)


class OrjsonRenderer(JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        renderer_context = renderer_context or {}
        if self.get_indent(accepted_media_type, renderer_context):
            # `Accept: application/json; indent=4`: orjson indents by 2 only; DRF does any width.
            return super().render(data, accepted_media_type, renderer_context)
        return json_bytes(data)
