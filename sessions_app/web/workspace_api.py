"""A session's workspace over HTTP (docs/design.md §28): what its files are, and one file's
bytes with the same headers as an uploaded file's (§23)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import selectors
from sessions_app.web import serializers
from sessions_app.web.api import ERRORS, SESSION_ID
from sessions_app.web.files_api import file_response

WORKSPACE_PATH = OpenApiParameter(
    "path", OpenApiTypes.STR, OpenApiParameter.PATH, description="the file's path in the workspace"
)


class _WorkspaceView(APIView):
    authentication_classes = [TokenAuthentication, SessionAuthentication]


@extend_schema(tags=["files"])
class WorkspaceView(_WorkspaceView):
    @extend_schema(parameters=[SESSION_ID], responses={200: serializers.WorkspaceOutput, **ERRORS})
    def get(self, request, id=None):
        return Response(selectors.workspace_get(session_id=id, owner_id=request.user.id))


@extend_schema(tags=["files"])
class WorkspaceFileView(_WorkspaceView):
    @extend_schema(
        parameters=[SESSION_ID, WORKSPACE_PATH],
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, **ERRORS},
    )
    def get(self, request, id=None, path=None):
        stored, opened = selectors.workspace_file_open(
            session_id=id, owner_id=request.user.id, path=path
        )
        return file_response(stored, opened)
