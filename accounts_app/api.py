"""`DELETE /api/me/` and `GET /api/me/export/` (docs/design.md §21): parse, call one service,
shape. `GET/PATCH /api/me/` are notices_app's (its settings sections, `retention_days` among
them); this view adds the delete to the same address."""

from __future__ import annotations

from django.contrib.auth import logout
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts_app.archive import user_data_filename, user_data_zip_async
from accounts_app.deletion import account_delete
from accounts_app.serializers import (
    AccountDeleteInput,
    MeWithRetentionOutput,
    MeWithRetentionPatchInput,
)
from jarvis_site.shared.errors import Code, status_of
from notices_app.web.api import AUTHENTICATION, ERRORS
from notices_app.web.api import MeView as SettingsView
from sessions_app.core.throttles import ExportRateThrottle
from sessions_app.web.serializers import ErrorOutput


class ConfirmationMismatch(exceptions.APIException):
    status_code = status_of(Code.CONFIRMATION_MISMATCH)
    default_code = Code.CONFIRMATION_MISMATCH


@extend_schema(tags=["me"])
class MeView(SettingsView):
    """`GET/PATCH /api/me/` (the caller's settings) and `DELETE /api/me/` (the account)."""

    # The schema documents DELETE's body, the typed confirmation (sessions_app.web.api.ApiSchema).
    delete_takes_body = True

    @extend_schema(responses={200: MeWithRetentionOutput, 401: ERRORS[401]})
    def get(self, request):
        return super().get(request)

    @extend_schema(
        request=MeWithRetentionPatchInput,
        responses={
            200: MeWithRetentionOutput,
            400: OpenApiResponse(
                ErrorOutput, description="invalid, or url_not_allowed (OUTBOUND_URL_ALLOWLIST)"
            ),
            401: ERRORS[401],
        },
    )
    def patch(self, request):
        return super().patch(request)

    @extend_schema(
        request=AccountDeleteInput,
        responses={
            204: None,
            400: OpenApiResponse(
                ErrorOutput, description="confirmation_mismatch: confirm is not the username"
            ),
            401: ERRORS[401],
            409: OpenApiResponse(ErrorOutput, description="session_busy: a turn is running"),
        },
    )
    def delete(self, request):
        serializer = AccountDeleteInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        username = request.user.get_username()
        if serializer.validated_data["confirm"] != username:
            raise ConfirmationMismatch(f'type your username ("{username}") to confirm')
        account_delete(user_id=request.user.pk)
        logout(request._request)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["me"])
class MeExportView(APIView):
    """`GET /api/me/export/`: a zip of everything the caller owns, streamed."""

    authentication_classes = AUTHENTICATION
    # Every export reads and compresses all the caller has: EXPORT_THROTTLE_RATE.
    throttle_classes = [ExportRateThrottle]

    @extend_schema(
        responses={
            (200, "application/zip"): OpenApiTypes.BINARY,
            401: ERRORS[401],
            429: OpenApiResponse(ErrorOutput, description="throttled (Retry-After)"),
        }
    )
    def get(self, request):
        response = StreamingHttpResponse(
            user_data_zip_async(owner_id=request.user.pk), content_type="application/zip"
        )
        filename = user_data_filename(request.user.get_username())
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
