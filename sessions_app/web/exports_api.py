"""The person's kept exports over HTTP (docs/design.md §31, "export before you delete"):
`GET /api/me/exports/` lists them, `GET /api/me/exports/{filename}/` downloads one — after
the session it was made from is deleted too. Only the caller's own; any other name is 404."""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from jarvis_site.shared.errors import Code, detail_of
from sessions_app import selectors
from sessions_app.core.throttles import FileRateThrottle
from sessions_app.web import serializers
from sessions_app.web.api import ERRORS

FILENAME = OpenApiParameter(
    "filename",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="an export's file name: the session's safe id and .md or .json",
)
NO_SUCH_EXPORT = OpenApiResponse(serializers.ErrorOutput, description="no such export of yours")


class _ExportsView(APIView):
    authentication_classes = [TokenAuthentication, SessionAuthentication]


@extend_schema(tags=["exports"])
class KeptExportsView(_ExportsView):
    @extend_schema(responses={200: serializers.KeptExportsOutput, 401: ERRORS[401]})
    def get(self, request):
        kept = selectors.kept_exports(owner_id=request.user.id)
        return Response({"exports": [export.to_api() for export in kept]})


@extend_schema(tags=["exports"])
class KeptExportView(_ExportsView):
    throttle_classes = [FileRateThrottle]

    @extend_schema(
        parameters=[FILENAME],
        responses={
            (200, "text/markdown"): OpenApiTypes.STR,
            (200, "application/json"): OpenApiTypes.OBJECT,
            401: ERRORS[401],
            404: NO_SUCH_EXPORT,
        },
    )
    def get(self, request, filename=None):
        kept = selectors.kept_export(owner_id=request.user.id, filename=filename)
        try:
            opened = kept.path.open("rb") if kept else None
        except FileNotFoundError:  # swept between the look and the open
            opened = None
        if opened is None:
            raise NotFound(detail_of(Code.NOT_FOUND))
        response = FileResponse(
            opened, as_attachment=True, filename=kept.filename, content_type=kept.content_type
        )
        response["X-Content-Type-Options"] = "nosniff"
        return response
