"""The files of a shared conversation over HTTP (docs/design.md §24): anyone holding a live
token reads a file attached to a message the share shows, and its thumbnail, with the same
headers as the owner's file routes (files_api.py); anything else is the share's one 404."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from sessions_app.core.throttles import FileRateThrottle, ShareRateThrottle
from sessions_app.selectors.shared_files import shared_file_open, shared_file_thumbnail
from sessions_app.web.files_api import FILE_ID, file_response, thumbnail_response
from sessions_app.web.share_api import NO_SHARE, THROTTLED, TOKEN


class _SharedFilesView(APIView):
    """No account, no credentials: the token is the key, as for the shared JSON."""

    authentication_classes = []
    permission_classes = [AllowAny]
    # A reader without an account is counted by address for both (core/throttles.py).
    throttle_classes = [ShareRateThrottle, FileRateThrottle]


@extend_schema(tags=["shares"])
class SharedFileView(_SharedFilesView):
    @extend_schema(
        parameters=[TOKEN, FILE_ID],
        auth=[],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            404: NO_SHARE,
            429: THROTTLED,
        },
    )
    def get(self, request, token, file_id):
        stored, opened = shared_file_open(token=token, file_id=file_id)
        return file_response(stored, opened)


@extend_schema(tags=["shares"])
class SharedFileThumbView(_SharedFilesView):
    @extend_schema(
        parameters=[TOKEN, FILE_ID],
        auth=[],
        responses={(200, "image/png"): OpenApiTypes.BINARY, 404: NO_SHARE, 429: THROTTLED},
    )
    def get(self, request, token, file_id):
        return thumbnail_response(shared_file_thumbnail(token=token, file_id=file_id))
