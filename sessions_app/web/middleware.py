"""Every error under /api/ is JSON with a `code`, also those that DRF never sees.

DRF shapes the errors of its own views (`sessions_app.web.api.exception_handler`). Django answers
the rest — an unknown /api/ path (404), an unhandled exception (500), a request refused before
any view — with HTML pages made for browsers. This middleware, first in MIDDLEWARE so that it
sees every response, gives programs the same `{"code", "detail"}` body there too.

It also refuses, with 411 `length_required`, an /api/ request whose body is sent chunked
(`Transfer-Encoding` without `Content-Length`). Django reads a request body only as far as
its Content-Length says, so it would see such a body as empty and act on the defaults — a
`POST /api/sessions/` with a chunked `{"id": ...}` would create a session under a server-made
id. A body over its path's cap never gets here: `manage.py serve` refuses it before reading
it (jarvis_site.request_bodies; the README's section on request bodies).
"""

from __future__ import annotations

from http import HTTPStatus

from django.http import JsonResponse

from jarvis_site.shared.errors import CODE_OF_STATUS, Code
from jarvis_site.shared.middleware import SyncAndAsyncMiddleware

API_PREFIX = "/api/"
# Headers of the original answer that a client still needs (Allow on 405, the challenge on 401).
KEPT_HEADERS = ("Allow", "WWW-Authenticate", "Retry-After")


def _body_without_length(request) -> bool:
    return "HTTP_TRANSFER_ENCODING" in request.META and not request.META.get("CONTENT_LENGTH")


def _is_json(response) -> bool:
    return response.get("Content-Type", "").startswith("application/json")


class ApiJsonErrorsMiddleware(SyncAndAsyncMiddleware):
    def call(self, request):
        refused = _refused_before(request)
        if refused is not None:
            return refused
        return _json_error(request, self.get_response(request))

    async def acall(self, request):
        refused = _refused_before(request)
        if refused is not None:
            return refused
        return _json_error(request, await self.get_response(request))


def _refused_before(request):
    if request.path.startswith(API_PREFIX) and _body_without_length(request):
        return JsonResponse(
            {
                "code": Code.LENGTH_REQUIRED,
                "detail": "send the request body with a Content-Length, not chunked",
            },
            status=411,
        )
    return None


def _json_error(request, response):
    """The answer itself, or, for an /api/ error that is not JSON, its JSON replacement."""
    if not request.path.startswith(API_PREFIX) or response.status_code < 400 or _is_json(response):
        return response
    status = response.status_code
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "error"
    code = CODE_OF_STATUS.get(status, Code.SERVER_ERROR if status >= 500 else Code.BAD_REQUEST)
    detail = f"no such API path: {request.path}" if status == 404 else phrase.lower()
    replacement = JsonResponse({"code": code, "detail": detail}, status=status)
    for header in KEPT_HEADERS:
        if header in response:
            replacement[header] = response[header]
    return replacement
