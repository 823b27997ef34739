"""Checks every /api/ request before any view sees it: body size, path and query string."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse

from .errors import error_body, is_api_request
from .inputs import text_problem


class ApiInputMiddleware:
    """413 `too_large` for a body over DATA_UPLOAD_MAX_MEMORY_SIZE, 400 `invalid` for a path or
    query string the database cannot store (NUL, lone surrogates); JSON bodies are checked by
    the parsers (organization.parsers), where they are decoded."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if is_api_request(request):
            refusal = self.refusal(request)
            if refusal is not None:
                return refusal
        return self.get_response(request)

    def refusal(self, request) -> JsonResponse | None:
        try:
            # Django's own limit: `body` refuses a Content-Length over the setting before reading.
            request.body  # noqa: B018
        except RequestDataTooBig:
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return JsonResponse(
                error_body(f"The request body is larger than {limit} bytes.", "too_large"),
                status=413,
            )
        problem = text_problem(request.path_info)
        where = "path"
        if problem is None:
            for key, values in request.GET.lists():
                where = f"query parameter {key!r}"
                problem = text_problem(key) or next(filter(None, map(text_problem, values)), None)
                if problem:
                    break
        if problem:
            return JsonResponse(
                error_body(f"Invalid input: {where} {problem}.", "invalid"), status=400
            )
        return None
