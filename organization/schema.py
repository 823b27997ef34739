"""The API's schema in one place: drf-spectacular extensions, the documented error responses,
and a serializer's JSON Schema as a tool's `inputSchema` (so REST and the tool cannot drift).
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse

from .serializers import ErrorSerializer


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "organization.auth.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An agent or organization key."}


# --- error responses: every app's views document their errors with these ---------------------

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Invalid input"),
    401: OpenApiResponse(ErrorSerializer, description="No or bad API key"),
    403: OpenApiResponse(ErrorSerializer, description="A rule forbids it"),
    404: OpenApiResponse(ErrorSerializer, description="Absent or another organization's"),
}


def conflict(description: str = "State conflict") -> OpenApiResponse:
    """The documented 409, described for the operation's own conflicts."""
    return OpenApiResponse(ErrorSerializer, description=description)


def errors(*codes: int) -> dict:
    """The documented error responses `codes` (all of ERRORS without codes), e.g. `errors(401)`."""
    return {code: ERRORS[code] for code in codes or ERRORS}


# Answered by any /api/ operation, outside its view: the throttles (API_THROTTLE_RATE, failed
# authentication per address), the database away and, for a body, its size limit
# (infrastructure/middleware.py).
_ANY_OPERATION = {
    "429": "Too many requests (rate_limited, authentication_throttled): wait Retry-After seconds",
    "503": "The database is busy or unreachable (database_busy, database_unavailable): "
    "retry after Retry-After seconds",
}
_WITH_A_BODY = {
    "413": "Body too large (too_large)",
    "415": "Not a JSON body (unsupported_media_type)",
}


def every_operation_answers_its_limits(result, generator, request, public):
    """drf-spectacular postprocessing hook: every /api/ operation documents 429 and 503, and each
    that takes a body 413 and 415, in the one error shape: a generated client (openapi-python-client) raises
    on a status its schema does not list rather than reading our error."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/"):
            continue
        for operation in operations.values():
            codes = {**_ANY_OPERATION, **(_WITH_A_BODY if "requestBody" in operation else {})}
            responses = operation.setdefault("responses", {})
            for code, description in codes.items():
                responses.setdefault(code, {"content": error, "description": description})
    return result


# --- a serializer as a tool's JSON Schema ------------------------------------------------------

# OpenAPI-only keys that a tool's JSON Schema does without: `default` (OpenAI's strict mode
# refuses it; the serializer applies defaults itself) and spectacular's `x-…` extensions.
_DROPPED = {"default"}


def input_schema_of(serializer_class, *, json_text: bool = True) -> dict:
    """The JSON Schema (2020-12) of `serializer_class`'s input, for a tool's `inputSchema`: the
    REST request mapping with nested serializers inlined and objects closed. `json_text` offers a
    free-form object as JSON text alone, as a tool publishes it.
    """
    # Imported here: spectacular's AutoSchema loads DRF's settings, which import the API's
    # exception handler; this module is imported while the apps load.
    from drf_spectacular.openapi import AutoSchema
    from drf_spectacular.plumbing import ComponentRegistry
    from drf_spectacular.settings import patched_settings
    from rest_framework.views import APIView

    view = APIView()
    view.request, view.format_kwarg = None, None
    # The choices' "* `value` - label" lists repeat the `enum` beside them: left out of tools.
    tool_settings = {
        "OAS_VERSION": "3.1.0",
        "COMPONENT_SPLIT_REQUEST": True,
        "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
    }
    with patched_settings(tool_settings):
        auto = AutoSchema()
        auto.registry = ComponentRegistry()
        auto.view, auto.method, auto.path = view, "POST", "/"
        schema = auto._map_serializer(serializer_class(), "request")
        components = {name: c.schema for (name, _), c in auto.registry._components.items()}
    schema = _json_schema(schema, components, json_text)
    # The serializer's docstring is for the API's readers; the tool has its own description.
    schema.pop("description", None)
    return schema


def _json_schema(node, components: dict, json_text: bool):
    if isinstance(node, list):
        return [_json_schema(item, components, json_text) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if json_text and node.get("x-json-text"):
        # A free-form object (JSONObjectField) as JSON text: strict mode cannot express an open
        # object, and a strict client (the Agents SDK) drops strict mode for the whole tool.
        return {"type": "string", **{k: v for k, v in node.items() if k == "description"}}
    ref = node.pop("$ref", None)
    if ref is not None:
        # The field's own keys (its description) win over the nested serializer's.
        node = {**components[ref.rsplit("/", 1)[1]], **node}
    all_of = node.pop("allOf", None)
    if all_of is not None and len(all_of) == 1:
        node = {**all_of[0], **node}
        return _json_schema(node, components, json_text)
    elif all_of is not None:
        node["allOf"] = all_of
    out = {}
    for key, value in node.items():
        if key in _DROPPED or key.startswith("x-"):
            continue
        if key == "properties":
            out[key] = {
                name: _json_schema(sub, components, json_text) for name, sub in value.items()
            }
        else:
            out[key] = _json_schema(value, components, json_text)
    if out.get("additionalProperties") == {}:
        # A free-form map (spectacular's DictField): the same as saying nothing.
        del out["additionalProperties"]
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
    return out
