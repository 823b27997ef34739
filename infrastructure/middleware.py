"""Checks every request before any view sees it: for /api/ the client address's failed
authentications, the body size, path and query string (answered as JSON); for the pages (admin,
console) the path, query string and form fields. And /api/'s answer when the database is away."""

from django.conf import settings
from django.core.exceptions import BadRequest, RequestDataTooBig, SuspiciousOperation
from django.http import HttpResponseBadRequest, JsonResponse, UnreadablePostError
from django.http.multipartparser import MultiPartParserError

from .errors import error_body, is_api_request
from .inputs import text_problem
from .throttling import address_locked_for, count_auth_failure, locked_out_message


class AuthFailureThrottleMiddleware:
    """/api/: every 401 counts against the client's address; past AUTH_FAILURE_LIMIT in the
    window its requests answer 429 `authentication_throttled` (with Retry-After) before any
    key is looked up."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not is_api_request(request):
            return self.get_response(request)
        address = request.META.get("REMOTE_ADDR")
        wait = address_locked_for(address)
        if wait is not None:
            body = error_body(locked_out_message(wait), "authentication_throttled")
            return JsonResponse(body, status=429, headers={"Retry-After": str(wait)})
        response = self.get_response(request)
        if response.status_code == 401:
            count_auth_failure(address)
        return response


class ApiInputMiddleware:
    """413 `too_large` for a body over DATA_UPLOAD_MAX_MEMORY_SIZE, 400 `invalid` for a path or
    query string the database cannot store (NUL, lone surrogates); JSON bodies are checked by
    the parsers (infrastructure.parsers), where they are decoded."""

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
        where, problem = first_text_problem(request, form=False)
        if problem:
            return JsonResponse(
                error_body(f"Invalid input: {where} {problem}.", "invalid"), status=400
            )
        return None


class PageInputMiddleware:
    """400 for a page request (admin, console) whose path, query string or form fields the
    database cannot store. Django's forms refuse NUL in their own fields, but not a list
    filter's parameter (`?status__exact=%00`) or a view that reads request.POST itself (the
    console's moves): each answered 500 when PostgreSQL refused the text."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not is_api_request(request):
            where, problem = first_text_problem(request, form=request.method == "POST")
            if problem:
                return HttpResponseBadRequest(
                    f"Invalid input: {where} {problem}.", content_type="text/plain; charset=utf-8"
                )
        return self.get_response(request)


def first_text_problem(request, *, form: bool) -> tuple[str, str | None]:
    """Where the request first carries text the database cannot store, and what is wrong."""
    problem = text_problem(request.path_info)
    if problem:
        return "path", problem
    fields = [("query parameter", request.GET)]
    if form:
        try:
            fields.append(("form field", request.POST))
        except (UnreadablePostError, MultiPartParserError, SuspiciousOperation, BadRequest):
            pass  # a body Django cannot read: left to its own handling (CSRF, the view's 400)
    for kind, data in fields:
        for key, values in data.lists():
            problem = text_problem(key) or next(filter(None, map(text_problem, values)), None)
            if problem:
                return f"{kind} {key!r}", problem
    return "", None
