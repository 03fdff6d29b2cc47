"""Middleware of the whole site: a Content-Security-Policy on every response, and requests that no
view should see refused up front with a 4xx (never a 500): NUL characters, which PostgreSQL cannot
store or compare, and bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB; file uploads included: a
solution file is at most PKB_MAX_CODE_BYTES)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def refuse(request: HttpRequest, status: int, detail: str) -> HttpResponse:
    """A 4xx a person (or a script, under /api/) can read."""
    if is_api(request):
        return JsonResponse({"detail": detail}, status=status)
    html = render_to_string("error.html", {"status": status, "detail": detail, "site_name": settings.SITE_NAME})
    return HttpResponse(html, status=status)


def too_big(limit: int) -> str:
    return f"the request body is larger than the limit of {limit / 1e6:.1f} MB"


class HostileInputMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        content_type = request.content_type or ""
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return refuse(request, 400, "the Content-Length header is not a number")
        if limit is not None and length > limit:  # uploads too: a solution file is far smaller
            return refuse(request, 413, too_big(limit))
        if "\x00" in request.path or "%00" in request.META.get("QUERY_STRING", ""):
            return refuse(request, 400, "the address contains a NUL character")
        if request.method == "POST" and content_type in FORM_TYPES:
            try:
                request.body  # noqa: B018 - read (and kept) first, so that views may still read the body
                fields = request.POST
            except RequestDataTooBig:
                return refuse(request, 413, too_big(limit))
            except SuspiciousOperation as exc:  # too many fields, a broken multipart body
                return refuse(request, 400, f"the form could not be read: {exc}")
            except OSError:  # the client went away mid-body (UnreadablePostError)
                return refuse(request, 400, "the request body could not be read")
            if any("\x00" in key or any("\x00" in v for v in values) for key, values in fields.lists()):
                return refuse(request, 400, "the form contains a NUL character")
        return self.get_response(request)


def content_security_policy() -> str:
    return "; ".join(" ".join((name, *sources)) for name, sources in settings.PKB_CSP.items())


class ContentSecurityPolicyMiddleware:
    """Scripts and styles from this site's own files only: no inline script, no inline style, no eval."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", content_security_policy())
        return response
