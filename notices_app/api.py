"""The HTTP API of notices_app (docs/design.md §14, §16): parse, call one service, shape.

Errors have the project's shape `{"code", "detail"}` (sessions_app.api.exception_handler, the
REST_FRAMEWORK exception handler).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.response import Response
from rest_framework.viewsets import ViewSet

from notices_app import schedules, serializers
from sessions_app.serializers import ErrorOutput

ERRORS = {
    400: OpenApiResponse(ErrorOutput, description="bad input"),
    401: OpenApiResponse(ErrorOutput, description="not authenticated"),
    404: OpenApiResponse(ErrorOutput, description="no such thing of yours"),
}


def _parse(serializer_class, data):
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


@extend_schema(tags=["schedules"])
class ScheduleViewSet(ViewSet):
    """The caller's reminders and scheduled prompts (docs/schedules.md)."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]

    @extend_schema(
        parameters=[serializers.ScheduleListQuery],
        responses={200: serializers.ScheduleOutput(many=True)},
    )
    def list(self, request):
        query = _parse(serializers.ScheduleListQuery, request.query_params)
        return Response(
            schedules.schedule_list(
                owner_id=request.user.id, include_inactive=query["state"] == "all"
            )
        )

    @extend_schema(
        request=serializers.ScheduleCreateInput,
        responses={201: serializers.ScheduleOutput, **ERRORS},
    )
    def create(self, request):
        data = _parse(serializers.ScheduleCreateInput, request.data)
        try:
            schedule = schedules.schedule_create(owner_id=request.user.id, **data)
        except schedules.ScheduleInvalid as error:
            raise exceptions.ValidationError({"schedule": [str(error)]}) from error
        return Response(schedules.schedule_to_api(schedule), status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={200: serializers.ScheduleOutput, **ERRORS},
    )
    def destroy(self, request, pk=None):
        try:
            schedule = schedules.schedule_cancel(schedule_id=int(pk), owner_id=request.user.id)
        except (ValueError, schedules.ScheduleNotFound):
            return Response(
                {"code": "not_found", "detail": "no such schedule"},
                status=status.HTTP_404_NOT_FOUND,
            )
        return Response(schedules.schedule_to_api(schedule))
