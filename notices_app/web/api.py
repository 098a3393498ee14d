"""The HTTP API of notices_app (docs/design.md §14, §16): parse, call one service, shape.

Errors have the project's shape `{"code", "detail"}` (sessions_app.web.api.exception_handler, the
REST_FRAMEWORK exception handler).
"""

from __future__ import annotations

from pathlib import Path

from django.db import transaction
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import ViewSet

from jarvis_site.shared.errors import Code
from notices_app.channels import preferences
from notices_app.services import goals, me, schedules
from notices_app.web import serializers
from sessions_app.web.serializers import ErrorOutput

AUTHENTICATION = [TokenAuthentication, SessionAuthentication]
SERVICE_WORKER = Path(__file__).parent.parent / "static" / "notices_app" / "sw.js"

ERRORS = {
    400: OpenApiResponse(ErrorOutput, description="bad input"),
    401: OpenApiResponse(ErrorOutput, description="not authenticated"),
    404: OpenApiResponse(ErrorOutput, description="no such thing of yours"),
}


def _parse(serializer_class, data):
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _not_found(what: str) -> Response:
    return Response({"code": Code.NOT_FOUND, "detail": f"no such {what}"}, status=404)


@extend_schema(tags=["schedules"])
class ScheduleViewSet(ViewSet):
    """The caller's reminders and scheduled prompts (docs/schedules.md)."""

    authentication_classes = AUTHENTICATION

    @extend_schema(
        parameters=[serializers.ScheduleListQuery],
        responses={200: serializers.ScheduleListOutput, 400: ERRORS[400], 401: ERRORS[401]},
    )
    def list(self, request):
        query = _parse(serializers.ScheduleListQuery, request.query_params)
        return Response(
            schedules.schedule_list(
                owner_id=request.user.id,
                include_inactive=query["state"] == "all",
                limit=query["limit"],
                offset=query["offset"],
            )
        )

    @extend_schema(
        request=serializers.ScheduleCreateInput,
        responses={
            201: serializers.ScheduleOutput,
            429: OpenApiResponse(
                ErrorOutput, description="too_many_schedules: MAX_SCHEDULES_PER_USER active"
            ),
            **ERRORS,
        },
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
            return _not_found("schedule")
        return Response(schedules.schedule_to_api(schedule))


@extend_schema(tags=["goals"])
class GoalViewSet(ViewSet):
    """The caller's goals (docs/design.md §25): set one, list them, pause, resume, cancel."""

    authentication_classes = AUTHENTICATION

    @extend_schema(responses={200: serializers.GoalListOutput, 401: ERRORS[401]})
    def list(self, request):
        return Response({"goals": goals.goal_list(owner_id=request.user.id)})

    @extend_schema(
        request=serializers.GoalCreateInput,
        responses={
            201: serializers.GoalOutput,
            429: OpenApiResponse(
                ErrorOutput, description="too_many_goals: MAX_ACTIVE_GOALS_PER_USER open"
            ),
            **ERRORS,
        },
    )
    def create(self, request):
        data = _parse(serializers.GoalCreateInput, request.data)
        try:
            goal = goals.goal_create(owner_id=request.user.id, **data)
        except goals.GoalInvalid as error:
            raise exceptions.ValidationError({"goal": [str(error)]}) from error
        return Response(goals.goal_to_api(goal), status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={200: serializers.GoalOutput, **ERRORS},
    )
    def retrieve(self, request, pk=None):
        try:
            goal = goals.goal_get(goal_id=int(pk), owner_id=request.user.id)
        except (ValueError, goals.GoalNotFound):
            return _not_found("goal")
        return Response(goals.goal_to_api(goal))

    @extend_schema(
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        request=serializers.GoalStatusInput,
        responses={200: serializers.GoalOutput, **ERRORS},
    )
    def partial_update(self, request, pk=None):
        data = _parse(serializers.GoalStatusInput, request.data)
        try:
            if "status" not in data:
                goal = goals.goal_get(goal_id=int(pk), owner_id=request.user.id)
            else:
                goal = goals.goal_set_status(
                    goal_id=int(pk), owner_id=request.user.id, status=data["status"]
                )
        except (ValueError, goals.GoalNotFound) as error:
            if isinstance(error, goals.GoalInvalid):
                raise exceptions.ValidationError({"status": [str(error)]}) from error
            return _not_found("goal")
        return Response(goals.goal_to_api(goal))


# --- the caller's settings ----------------------------------------------------------------------


def _me(user) -> dict:
    answer: dict = {}
    for section in me.SECTIONS.values():
        answer.update(section.read(user))
    return answer


@extend_schema(tags=["me"])
class MeView(APIView):
    """`GET/PATCH /api/me/`: the caller's settings, section by section (notices_app.services.me)."""

    authentication_classes = AUTHENTICATION

    @extend_schema(responses={200: serializers.MeOutput, 401: ERRORS[401]})
    def get(self, request):
        return Response(_me(request.user))

    @extend_schema(
        request=serializers.MePatchInput,
        responses={
            200: serializers.MeOutput,
            400: OpenApiResponse(
                ErrorOutput, description="invalid, or url_not_allowed (OUTBOUND_URL_ALLOWLIST)"
            ),
            401: ERRORS[401],
        },
    )
    def patch(self, request):
        if not isinstance(request.data, dict):
            raise exceptions.ValidationError({"body": ["a JSON object of settings to change"]})
        changes = []
        owned: set[str] = set()
        for section in me.SECTIONS.values():
            fields = set(section.patch_input().fields)
            owned |= fields
            sent = {name: value for name, value in request.data.items() if name in fields}
            if sent:
                changes.append((section, _parse(section.patch_input, sent)))
        unknown = sorted(set(request.data) - owned)
        if unknown:
            raise exceptions.ValidationError(
                {name: ["not a setting that can be changed"] for name in unknown}
            )
        # All sections or none: a refused field leaves every setting as it was.
        with transaction.atomic():
            for section, data in changes:
                section.update(request.user, data)
        return Response(_me(request.user))


@extend_schema(tags=["me"])
class PushSubscriptionViewSet(ViewSet):
    """`POST /api/me/push-subscriptions/` (the browser's `PushSubscription.toJSON()`) and
    `DELETE /api/me/push-subscriptions/{id}/`."""

    authentication_classes = AUTHENTICATION

    @extend_schema(
        request=serializers.PushSubscriptionInput,
        responses={
            201: serializers.PushSubscriptionOutput,
            200: serializers.PushSubscriptionOutput,
            400: OpenApiResponse(
                ErrorOutput, description="invalid, or url_not_allowed (OUTBOUND_URL_ALLOWLIST)"
            ),
            401: ERRORS[401],
            429: OpenApiResponse(
                ErrorOutput,
                description="too_many_subscriptions: MAX_PUSH_SUBSCRIPTIONS_PER_USER browsers "
                "subscribed",
            ),
        },
    )
    def create(self, request):
        data = _parse(serializers.PushSubscriptionInput, request.data)
        try:
            subscription, created = preferences.push_subscription_add(
                owner_id=request.user.id, endpoint=data["endpoint"], **data["keys"]
            )
        except preferences.PushSubscriptionInvalid as error:
            raise exceptions.ValidationError({"keys": [str(error)]}) from error
        return Response(
            {"id": subscription.id},
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        request=None,
        responses={204: None, 401: ERRORS[401], 404: ERRORS[404]},
    )
    def destroy(self, request, pk=None):
        try:
            preferences.push_subscription_remove(owner_id=request.user.id, subscription_id=int(pk))
        except (ValueError, preferences.PushSubscriptionNotFound):
            return _not_found("push subscription")
        return Response(status=status.HTTP_204_NO_CONTENT)


@never_cache
def service_worker(request):
    """The page's service worker, served from the site's root so that its scope covers the
    page (a script under /static/ could only control /static/)."""
    return HttpResponse(SERVICE_WORKER.read_bytes(), content_type="text/javascript")
