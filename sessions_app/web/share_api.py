"""Share links over HTTP (docs/design.md §24): the owner's links of a session, the shared
conversation for anyone with the token (JSON and a read-only page), and a reader's copy."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import selectors
from sessions_app.core.throttles import BranchRateThrottle, ShareRateThrottle
from sessions_app.selectors.shares import (
    ShareNotFound,
    share_to_api,
    share_url,
    shared_view,
)
from sessions_app.services import shares
from sessions_app.web import serializers
from sessions_app.web import share_serializers as io
from sessions_app.web.api import ERRORS, SESSION_ID, THROTTLED, _parse

SHARE_ID = OpenApiParameter(
    "share_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="a share link's `id`"
)
TOKEN = OpenApiParameter(
    "token", OpenApiTypes.STR, OpenApiParameter.PATH, description="the token of a share's url"
)
NO_SHARE = OpenApiResponse(
    serializers.ErrorOutput, description="unknown, revoked or expired link: one answer"
)


class OwnerApiView(APIView):
    # As the sessions API: a token first, the page's cookie session with CSRF on writes.
    authentication_classes = [TokenAuthentication, SessionAuthentication]


@extend_schema(tags=["shares"])
class SessionSharesView(OwnerApiView):
    def get_throttles(self):
        return [ShareRateThrottle()] if self.request.method == "POST" else []

    @extend_schema(parameters=[SESSION_ID], responses={200: io.ShareOutput(many=True), **ERRORS})
    def get(self, request, id):
        found = shares.shares_list(session_id=id, owner_id=request.user.id)
        return Response([share_to_api(share) for share in found])

    @extend_schema(
        parameters=[SESSION_ID],
        request=io.ShareCreateInput,
        responses={201: io.ShareCreatedOutput, 429: THROTTLED, **ERRORS},
    )
    def post(self, request, id):
        data = _parse(io.ShareCreateInput, request.data)
        share, token = shares.share_create(
            session_id=id,
            owner_id=request.user.id,
            expires_in_days=data.get("expires_in_days"),
            include_tools=data["include_tools"],
        )
        return Response(
            {**share_to_api(share), "url": share_url(token)}, status=status.HTTP_201_CREATED
        )


@extend_schema(tags=["shares"])
class SessionShareView(OwnerApiView):
    @extend_schema(
        parameters=[SESSION_ID, SHARE_ID], responses={204: None, **ERRORS, 404: NO_SHARE}
    )
    def delete(self, request, id, share_id):
        shares.share_revoke(session_id=id, owner_id=request.user.id, share_id=share_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["shares"])
class SessionShareRefreshView(OwnerApiView):
    throttle_classes = [ShareRateThrottle]

    @extend_schema(
        parameters=[SESSION_ID, SHARE_ID],
        request=None,
        responses={200: io.ShareOutput, 429: THROTTLED, **ERRORS, 404: NO_SHARE},
    )
    def post(self, request, id, share_id):
        share = shares.share_refresh(session_id=id, owner_id=request.user.id, share_id=share_id)
        return Response(share_to_api(share))


@extend_schema(tags=["shares"])
class SharedView(APIView):
    """Anyone holding the token reads the conversation: no account, no credentials."""

    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = [ShareRateThrottle]

    @extend_schema(
        parameters=[TOKEN], auth=[], responses={200: io.SharedOutput, 404: NO_SHARE, 429: THROTTLED}
    )
    def get(self, request, token):
        return Response(shared_view(token))


@extend_schema(tags=["shares"])
class SharedCopyView(OwnerApiView):
    """A signed-in reader's own session holding what the share shows."""

    throttle_classes = [BranchRateThrottle]

    @extend_schema(
        parameters=[TOKEN],
        request=None,
        responses={
            201: serializers.SessionOutput,
            401: ERRORS[401],
            404: NO_SHARE,
            429: THROTTLED,
        },
    )
    def post(self, request, token):
        copy = shares.shared_copy(token=token, owner_id=request.user.id)
        return Response(selectors.session_to_api(copy), status=status.HTTP_201_CREATED)


# The shared page shows text someone else wrote to anyone holding the link: no script but
# the page's own files runs, nothing is fetched from or sent to another origin, and no other
# site frames it. (Markdown is sanitized too; this is the second wall.)
SHARED_PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


@require_GET
@ensure_csrf_cookie  # the copy button of a signed-in reader sends it back
def shared_page(request, token):
    """The read-only page of a share: the conversation only, never indexed."""
    throttle = ShareRateThrottle()
    if not throttle.allow_request(request, None):
        wait = max(1, int(throttle.wait() or 1))
        response = HttpResponse(
            "Too many requests; try again shortly.\n", status=429, content_type="text/plain"
        )
        response["Retry-After"] = str(wait)
        return response
    try:
        shown = shared_view(token)
    except ShareNotFound:
        raise Http404("no such share") from None
    response = render(request, "shared.html", {"shared": shown, "token": token})
    response["Content-Security-Policy"] = SHARED_PAGE_CSP
    return response
