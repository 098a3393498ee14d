"""The person's procedures over HTTP (docs/design.md §29, §22): `GET /api/me/procedures/`
lists the drafts consolidation made and the ones they approved; `PATCH
/api/me/procedures/{id}/ {status}` approves or rejects one. Only approved procedures reach
the model. Parse, call one service, shape; errors in the project's `{"code", "detail"}`."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_app import serializers
from memory_app.services import (
    procedure_decide,
    procedure_get,
    procedure_to_api,
    procedures_of_owner,
)
from sessions_app.web.serializers import ErrorOutput

AUTHENTICATION = [TokenAuthentication, SessionAuthentication]
PROCEDURE_ID = OpenApiParameter(
    "procedure_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="the procedure's id"
)
NOT_AUTHENTICATED = OpenApiResponse(ErrorOutput, description="not authenticated")


def _parse(serializer_class, data):
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


@extend_schema(tags=["memory"])
class ProceduresView(APIView):
    authentication_classes = AUTHENTICATION

    @extend_schema(responses={200: serializers.ProceduresOutput, 401: NOT_AUTHENTICATED})
    def get(self, request):
        procedures = procedures_of_owner(owner_id=request.user.id)
        return Response({"procedures": [procedure_to_api(p) for p in procedures]})


@extend_schema(tags=["memory"])
class ProcedureView(APIView):
    authentication_classes = AUTHENTICATION

    @extend_schema(
        parameters=[PROCEDURE_ID],
        request=serializers.ProcedureDecisionInput,
        responses={
            200: serializers.ProcedureOutput,
            400: OpenApiResponse(
                ErrorOutput, description='invalid: status is not "approved" or "rejected"'
            ),
            401: NOT_AUTHENTICATED,
            404: OpenApiResponse(ErrorOutput, description="not_found: no such procedure of yours"),
        },
    )
    def patch(self, request, procedure_id: int):
        data = _parse(serializers.ProcedureDecisionInput, request.data)
        if "status" in data:
            procedure = procedure_decide(
                procedure_id=procedure_id, owner_id=request.user.id, status=data["status"]
            )
        else:
            procedure = procedure_get(procedure_id=procedure_id, owner_id=request.user.id)
        return Response(procedure_to_api(procedure))
