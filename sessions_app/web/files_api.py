"""Files of a session over HTTP (docs/design.md §23): upload, read back, thumbnail.

Bytes go out with headers that keep a browser from running them: `nosniff`, a sandboxing
CSP, and `attachment` for anything but an image."""

from __future__ import annotations

from typing import BinaryIO

from django.conf import settings
from django.http import FileResponse, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import selectors
from sessions_app.core.throttles import FileRateThrottle, UploadRateThrottle
from sessions_app.models import Blob
from sessions_app.selectors.files import StoredFile
from sessions_app.services import files
from sessions_app.web import serializers
from sessions_app.web.api import ERRORS, SESSION_ID, _parse
from sessions_app.web.parsers import MULTIPART_ALLOWANCE

FILE_ID = OpenApiParameter(
    "file_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="the file's SHA-256"
)
# What a browser may do with a file it is sent: show it, nothing else (no script, no form,
# no plugin), even when opened as a page of its own.
FILE_CSP = "sandbox; default-src 'none'; img-src 'self'; style-src 'unsafe-inline'"


def _safe(response: HttpResponse) -> HttpResponse:
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = FILE_CSP
    # Content-addressed: the bytes under an id never change.
    response["Cache-Control"] = "private, max-age=31536000, immutable"
    return response


def file_response(stored: StoredFile, opened: BinaryIO) -> HttpResponse:
    """A file's bytes as a browser may only look at them: inline for an image, a download
    for anything else, text as plain text."""
    is_image = stored.kind == Blob.IMAGE
    content_type = "text/plain; charset=utf-8" if stored.kind == Blob.TEXT else stored.mime
    response = FileResponse(
        opened, as_attachment=not is_image, filename=stored.name, content_type=content_type
    )
    return _safe(response)


def thumbnail_response(png: bytes) -> HttpResponse:
    return _safe(HttpResponse(png, content_type="image/png"))


class _FilesView(APIView):
    authentication_classes = [TokenAuthentication, SessionAuthentication]


@extend_schema(tags=["files"])
class FileUploadView(_FilesView):
    parser_classes = [MultiPartParser]
    throttle_classes = [UploadRateThrottle]

    @extend_schema(
        parameters=[SESSION_ID],
        request={"multipart/form-data": serializers.FileUploadInput},
        responses={
            201: serializers.FileOutput,
            400: OpenApiResponse(
                serializers.ErrorOutput,
                description="image_too_large: more pixels than Pillow's bomb limit; invalid",
            ),
            401: ERRORS[401],
            404: ERRORS[404],
            413: OpenApiResponse(
                serializers.ErrorOutput,
                description="too_large: over UPLOAD_MAX_BYTES; quota_exceeded: over "
                "USER_STORAGE_QUOTA_BYTES",
            ),
            415: OpenApiResponse(
                serializers.ErrorOutput,
                description="unsupported_file: not an image, a text or a PDF",
            ),
            429: OpenApiResponse(
                serializers.ErrorOutput, description="throttled (UPLOAD_THROTTLE_RATE)"
            ),
        },
    )
    def post(self, request, id=None):
        # Refused before the body is read when the client says how large it is.
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
        if declared > settings.UPLOAD_MAX_BYTES + MULTIPART_ALLOWANCE:
            raise files.upload_too_large()
        upload = _parse(serializers.FileUploadInput, request.data)["file"]
        stored = files.file_upload(
            session_id=id,
            owner_id=request.user.id,
            file=upload,
            size=upload.size,
            name=upload.name or "file",
        )
        return Response(stored.to_api(), status=status.HTTP_201_CREATED)


FILE_THROTTLED = OpenApiResponse(
    serializers.ErrorOutput, description="throttled (FILE_THROTTLE_RATE)"
)


@extend_schema(tags=["files"])
class FileView(_FilesView):
    throttle_classes = [FileRateThrottle]

    @extend_schema(
        parameters=[SESSION_ID, FILE_ID],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            **ERRORS,
            429: FILE_THROTTLED,
        },
    )
    def get(self, request, id=None, file_id=None):
        stored, opened = selectors.file_open(
            session_id=id, owner_id=request.user.id, file_id=file_id
        )
        return file_response(stored, opened)


@extend_schema(tags=["files"])
class FileThumbView(_FilesView):
    throttle_classes = [FileRateThrottle]

    @extend_schema(
        parameters=[SESSION_ID, FILE_ID],
        responses={(200, "image/png"): OpenApiTypes.BINARY, **ERRORS, 429: FILE_THROTTLED},
    )
    def get(self, request, id=None, file_id=None):
        png = selectors.file_thumbnail(session_id=id, owner_id=request.user.id, file_id=file_id)
        return thumbnail_response(png)
