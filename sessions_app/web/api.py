"""The HTTP API of docs/design.md §7: parse, call one service or selector, shape the answer.

Every error is `{"code": ..., "detail": ...}` (`exception_handler`, installed in settings as
REST_FRAMEWORK["EXCEPTION_HANDLER"]). Another user's session is a 404, never a 403.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.decorators import action
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.viewsets import ViewSet

from jarvis_site.shared.errors import Code, DomainError, detail_of, status_of
from jarvis_site.shared.outages import database_away
from sessions_app import selectors
from sessions_app.core.throttles import (
    BranchRateThrottle,
    ImportRateThrottle,
    SearchRateThrottle,
    TurnRateThrottle,
)
from sessions_app.formats import SQLITE_MAGIC
from sessions_app.services import approvals as approval_services
from sessions_app.services import deletion, notices, organize, prompt_modes, sessions
from sessions_app.services import turns as turn_services
from sessions_app.services.foreign_import import (
    ForeignFormatInvalid,
    ImportTooLarge,
    history_import,
)
from sessions_app.store import InvalidSessionId
from sessions_app.web import serializers
from sessions_app.web.parsers import too_large

logger = logging.getLogger(__name__)


def _flatten(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_flatten(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return " ".join(_flatten(item) for item in detail)
    return str(detail)


def _field_messages(detail, prefix: str = "") -> dict[str, list[str]]:
    """`{field: [message, …]}` with nested fields named by their path (`channels.webpush`),
    the one shape `fields` has in the schema (docs/design.md §7)."""
    if isinstance(detail, dict):
        messages: dict[str, list[str]] = {}
        for key, value in detail.items():
            messages.update(_field_messages(value, f"{prefix}{key}."))
        return messages
    if isinstance(detail, list) and any(isinstance(item, (dict, list)) for item in detail):
        messages = {}
        for index, item in enumerate(detail):
            messages.update(_field_messages(item, f"{prefix}{index}."))
        return messages
    items = detail if isinstance(detail, list) else [detail]
    return {(prefix[:-1] or "non_field_errors"): [str(item) for item in items]}


def exception_handler(exc, context):
    """DRF's handler, reshaped so that every error body is {"code", "detail"}."""
    if isinstance(exc, RequestDataTooBig):
        # A form body over DATA_UPLOAD_MAX_MEMORY_SIZE (Django's check) answers as a JSON one
        # over the same limit does (sessions_app.web.parsers): 413 too_large.
        exc = too_large()
    if isinstance(exc, DomainError):
        # The one mapping of a refused request on HTTP: its code, the table's status.
        return Response({"code": exc.code, "detail": exc.detail}, status=status_of(exc.code))
    if database_away(exc):
        # Not a server error: the request can be sent again once the database is back (§32).
        code = Code.DATABASE_UNAVAILABLE
        return Response({"code": code, "detail": detail_of(code)}, status=status_of(code))
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        body = {
            "code": Code.INVALID,
            "detail": _flatten(exc.detail),
            "fields": _field_messages(exc.detail),
        }
    elif isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        body = {"code": code, "detail": _flatten(exc.detail)}
    else:  # Http404 / PermissionDenied from Django, already turned into a response
        code = Code.NOT_FOUND if response.status_code == 404 else Code.PERMISSION_DENIED
        body = {"code": code, "detail": _flatten(response.data.get("detail", ""))}
    response.data = body
    return response


class IgnoreFormatQueryNegotiation(DefaultContentNegotiation):
    """`?format=` names an export or context format on this API, not a DRF renderer."""

    class settings:
        URL_FORMAT_OVERRIDE = None


def _parse(serializer_class, data):
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


ERRORS = {
    400: OpenApiResponse(serializers.ErrorOutput, description="bad id or bad input"),
    401: OpenApiResponse(serializers.ErrorOutput, description="not authenticated"),
    404: OpenApiResponse(serializers.ErrorOutput, description="no such session of yours"),
}
SESSION_ID = OpenApiParameter(
    "id",
    serializers.SESSION_ID_SCHEMA,
    OpenApiParameter.PATH,
    description="session id (docs/design.md §6)",
)
TURN_ID = OpenApiParameter(
    "turn_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="a turn's `turn_id`"
)
THROTTLED = OpenApiResponse(serializers.ErrorOutput, description="throttled (Retry-After)")


class ApiSchema(AutoSchema):
    """Declares on every operation the errors any request to it may get (docs/design.md §7):
    401 without credentials; where it takes a body, 413 for one over
    DATA_UPLOAD_MAX_MEMORY_SIZE and 415 for one in a media type no parser reads."""

    def _get_request_body(self, direction="request"):
        # drf-spectacular documents bodies of PUT, PATCH and POST only; a view whose DELETE
        # takes one (the account's typed confirmation) says so with `delete_takes_body`.
        if self.method == "DELETE" and getattr(self.view, "delete_takes_body", False):
            self.method = "POST"
            try:
                return super()._get_request_body(direction)
            finally:
                self.method = "DELETE"
        return super()._get_request_body(direction)

    def get_operation(self, *args, **kwargs):
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        for parameter in operation.get("parameters", []):
            _empty_is_the_default(parameter)
        body = operation.get("requestBody")
        if body and any(f"/{name}" in str(body) for name in NONEMPTY_INPUTS):
            body["required"] = True  # a PATCH without a body says nothing: a 400
        error = {"$ref": "#/components/schemas/ErrorOutput"}
        common = {"401": "not_authenticated or authentication_failed"}
        if "requestBody" in operation:
            common["413"] = "too_large: the body is over DATA_UPLOAD_MAX_MEMORY_SIZE"
            common["415"] = "unsupported_media_type: a body that is not JSON or a form"
        for code, description in common.items():
            operation["responses"].setdefault(
                code,
                {"content": {"application/json": {"schema": error}}, "description": description},
            )
        return operation


# Request bodies whose every unknown key is a 400 (the caller's settings): the schema says so,
# where for the others an unknown key is ignored.
CLOSED_INPUTS = ("PatchedMeWithRetentionPatchInput", "MeChannelsPatchInput")
# Request bodies that must say something (an empty PATCH of a session is a 400).
NONEMPTY_INPUTS = ("PatchedSessionPatchInput",)


def closed_inputs_hook(result, generator, request, public):
    """drf-spectacular postprocessing hook: CLOSED_INPUTS take no other properties, and
    NONEMPTY_INPUTS at least one."""
    schemas = result.get("components", {}).get("schemas", {})
    for name in CLOSED_INPUTS:
        if name in schemas:
            schemas[name]["additionalProperties"] = False
    for name in NONEMPTY_INPUTS:
        if name in schemas:
            schemas[name]["minProperties"] = 1
    return result


def _empty_is_the_default(parameter: dict) -> None:
    """A query parameter sent empty (`?format=`) is read as absent — its default — as
    Django reads an empty form field: the schema says so instead of refusing it."""
    schema = parameter.get("schema", {})
    if parameter.get("in") != "query" or parameter.get("required") or "minLength" not in schema:
        return
    del schema["minLength"]
    if "enum" in schema:
        schema["enum"] = [*schema["enum"], ""]


@extend_schema(tags=["sessions"])
class SessionViewSet(ViewSet):
    # Token first: a program without credentials gets 401 with `WWW-Authenticate: Token`;
    # the browser's cookie session still works, with CSRF enforced on writes.
    authentication_classes = [TokenAuthentication, SessionAuthentication]
    content_negotiation_class = IgnoreFormatQueryNegotiation
    lookup_field = "id"
    lookup_value_regex = "[^/]+"

    # --- collection -----------------------------------------------------------------
    @extend_schema(
        parameters=[serializers.SessionListQuery],
        responses={200: serializers.SessionOutput(many=True), 400: ERRORS[400]},
    )
    def list(self, request):
        query = _parse(serializers.SessionListQuery, request.query_params)
        return Response(
            selectors.session_list(
                owner_id=request.user.id,
                agent=query.get("agent"),
                include_tests=query["include_tests"],
                include_subagents=query["include_subagents"],
                archived=query["archived"],
                limit=query["limit"],
                offset=query["offset"],
            )
        )

    @extend_schema(
        request=serializers.SessionCreateInput,
        responses={
            201: serializers.SessionOutput,
            200: serializers.SessionOutput,
            409: OpenApiResponse(
                serializers.ErrorOutput, description="agent_mismatch or id_unavailable"
            ),
            **ERRORS,
        },
    )
    def create(self, request):
        data = _parse(serializers.SessionCreateInput, request.data)
        meta, created = sessions.session_create(
            owner_id=request.user.id,
            session_id=data.get("id"),
            agent=data["agent"],
            title=data["title"],
        )
        return Response(
            selectors.session_to_api(meta),
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    # --- one session ----------------------------------------------------------------
    @extend_schema(
        parameters=[SESSION_ID], responses={200: serializers.SessionDetailOutput, **ERRORS}
    )
    def retrieve(self, request, id=None):
        return Response(selectors.session_detail(session_id=id, owner_id=request.user.id))

    @extend_schema(
        parameters=[SESSION_ID],
        request=serializers.SessionPatchInput,
        responses={
            200: serializers.SessionOutput,
            409: OpenApiResponse(serializers.ErrorOutput, description=Code.SESSION_BUSY),
            **ERRORS,
        },
    )
    def partial_update(self, request, id=None):
        data = _parse(serializers.SessionPatchInput, request.data)
        if data.keys() & {"model", "thinking"}:
            meta = sessions.session_configure(
                session_id=id,
                owner_id=request.user.id,
                model=data.get("model"),
                thinking=data.get("thinking"),
            )
        if data.keys() & {"title", "pinned", "archived"}:
            # Naming and ordering the list: no turn lease, and no entry in the conversation.
            # After the settings, which may be refused (busy): a refused PATCH changes nothing.
            meta = organize.session_organize(
                session_id=id,
                owner_id=request.user.id,
                title=data.get("title"),
                pinned=data.get("pinned"),
                archived=data.get("archived"),
            )
        return Response(selectors.session_to_api(meta))

    @extend_schema(
        parameters=[SESSION_ID],
        responses={
            200: serializers.DeleteOutput,
            409: OpenApiResponse(serializers.ErrorOutput, description=Code.SESSION_CONNECTED),
            **ERRORS,
        },
    )
    def destroy(self, request, id=None):
        deleted = deletion.session_delete(session_id=id, owner_id=request.user.id)
        # Its exports stay (the person's copy): the answer says where they download.
        kept = (
            selectors.kept_exports_of_session(owner_id=request.user.id, session_id=id)
            if deleted
            else []
        )
        return Response({"deleted": deleted, "exports": [export.to_api() for export in kept]})

    @extend_schema(
        parameters=[SESSION_ID, serializers.EntriesQuery],
        responses={200: serializers.EntriesOutput, **ERRORS},
    )
    @action(detail=True, methods=["get"])
    def entries(self, request, id=None):
        query = _parse(serializers.EntriesQuery, request.query_params)
        return Response(
            selectors.session_entries(
                session_id=id,
                owner_id=request.user.id,
                after_seq=query.get("after_seq", 0),
                before_seq=query.get("before_seq"),
                limit=query.get("limit"),
            )
        )

    @extend_schema(
        parameters=[SESSION_ID, serializers.ContextQuery],
        responses={200: serializers.ContextOutput, **ERRORS},
    )
    @action(detail=True, methods=["get"])
    def context(self, request, id=None):
        query = _parse(serializers.ContextQuery, request.query_params)
        return Response(
            selectors.session_context(
                session_id=id,
                owner_id=request.user.id,
                fmt=query["format"],
                tokens_only=query["tokens_only"],
            )
        )

    @extend_schema(
        parameters=[SESSION_ID],
        request=serializers.MessageInput,
        responses={
            200: serializers.TurnOutput,
            202: OpenApiResponse(
                serializers.QueuedOutput, description="queued (mode queue, steer or interrupt)"
            ),
            409: OpenApiResponse(serializers.ErrorOutput, description="session_busy, queue_full"),
            429: OpenApiResponse(
                serializers.ErrorOutput, description="throttled, or too_many_turns"
            ),
            **ERRORS,
        },
    )
    @action(detail=True, methods=["post"], throttle_classes=[TurnRateThrottle])
    def messages(self, request, id=None):
        data = _parse(serializers.MessageInput, request.data)
        if data["mode"] != prompt_modes.REJECT:
            waiting = prompt_modes.prompt_enqueue(
                session_id=id,
                owner_id=request.user.id,
                text=data["text"],
                mode=data["mode"],
                attachments=data.get("attachments"),
            )
            return Response(
                {"queue_id": waiting.queue_id, "position": waiting.position},
                status=status.HTTP_202_ACCEPTED,
            )
        result = turn_services.turn_send(
            session_id=id,
            owner_id=request.user.id,
            text=data["text"],
            attachments=data.get("attachments"),
        )
        return Response(
            {
                "turn_id": result.turn_id,
                "status": result.status,
                "error": result.error,
                "code": result.code,
                "entries": [selectors.entry_to_api(entry) for entry in result.entries],
            }
        )

    @extend_schema(
        parameters=[SESSION_ID, TURN_ID],
        responses={200: serializers.TurnTimelineOutput, **ERRORS},
    )
    @action(detail=True, methods=["get"], url_path=r"turns/(?P<turn_id>[^/]+)")
    def turns(self, request, id=None, turn_id=None):
        return Response(
            selectors.turn_timeline(session_id=id, owner_id=request.user.id, turn_id=turn_id)
        )

    @extend_schema(
        parameters=[SESSION_ID, TURN_ID],
        responses={200: serializers.TurnRequestsOutput, **ERRORS},
    )
    @action(detail=True, methods=["get"], url_path=r"turns/(?P<turn_id>[^/]+)/requests")
    def turn_requests(self, request, id=None, turn_id=None):
        return Response(
            selectors.turn_requests(session_id=id, owner_id=request.user.id, turn_id=turn_id)
        )

    @extend_schema(
        parameters=[
            SESSION_ID,
            OpenApiParameter(
                "queue_id",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                description="the id from `queued` or the 202 of a queued message",
            ),
        ],
        request=None,
        responses={200: serializers.QueueCancelOutput, **ERRORS},
    )
    @action(detail=True, methods=["delete"], url_path=r"queue/(?P<queue_id>[^/]+)")
    def queue(self, request, id=None, queue_id=None):
        prompt_modes.queue_cancel(session_id=id, owner_id=request.user.id, queue_id=queue_id)
        return Response({"queue_id": queue_id, "cancelled": True})

    @extend_schema(
        parameters=[SESSION_ID], request=None, responses={200: serializers.AbortOutput, **ERRORS}
    )
    @action(detail=True, methods=["post"])
    def abort(self, request, id=None):
        return Response(
            {"aborted": turn_services.turn_abort(session_id=id, owner_id=request.user.id)}
        )

    @extend_schema(
        parameters=[
            SESSION_ID,
            OpenApiParameter(
                "call_id",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                description="the id of the tool call from `approval_request`",
            ),
        ],
        request=serializers.ApprovalInput,
        responses={
            200: serializers.ApprovalOutput,
            409: OpenApiResponse(
                serializers.ErrorOutput,
                description="approval_closed: already answered, timed out or stopped",
            ),
            **ERRORS,
        },
    )
    @action(detail=True, methods=["post"], url_path=r"approvals/(?P<call_id>[^/]+)")
    def approvals(self, request, id=None, call_id=None):
        data = _parse(serializers.ApprovalInput, request.data)
        decided = approval_services.approval_decide(
            session_id=id, owner_id=request.user.id, call_id=call_id, allow=data["allow"]
        )
        return Response({"call_id": call_id, "status": decided})

    @extend_schema(parameters=[SESSION_ID], responses={200: serializers.TreeNodeOutput, **ERRORS})
    @action(detail=True, methods=["get"])
    def tree(self, request, id=None):
        return Response(selectors.session_tree(session_id=id, owner_id=request.user.id))

    @extend_schema(
        parameters=[SESSION_ID],
        request=serializers.BranchInput,
        responses={
            201: serializers.SessionOutput,
            409: OpenApiResponse(serializers.ErrorOutput, description=Code.ID_UNAVAILABLE),
            429: THROTTLED,
            **ERRORS,
        },
    )
    @action(detail=True, methods=["post"], throttle_classes=[BranchRateThrottle])
    def branch(self, request, id=None):
        data = _parse(serializers.BranchInput, request.data)
        try:
            meta = sessions.session_branch(
                session_id=id,
                owner_id=request.user.id,
                new_id=data.get("id"),
                at_seq=data.get("at_seq"),
            )
        except ValueError as error:
            if isinstance(error, InvalidSessionId):
                raise
            raise exceptions.ValidationError({"at_seq": [str(error)]}) from error
        return Response(selectors.session_to_api(meta), status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[SESSION_ID],
        request=None,
        responses={
            201: serializers.EntryOutput,
            409: OpenApiResponse(serializers.ErrorOutput, description=Code.NOTHING_TO_COMPACT),
            **ERRORS,
        },
    )
    @action(detail=True, methods=["post"])
    def compact(self, request, id=None):
        entry = sessions.session_compact(session_id=id, owner_id=request.user.id)
        return Response(selectors.entry_to_api(entry), status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[SESSION_ID, serializers.ExportQuery],
        responses={
            (200, "text/markdown"): OpenApiTypes.STR,
            (200, "application/json"): OpenApiTypes.OBJECT,
            **ERRORS,
        },
    )
    @action(detail=True, methods=["get"])
    def export(self, request, id=None):
        query = _parse(serializers.ExportQuery, request.query_params)
        export = sessions.session_export(
            session_id=id, owner_id=request.user.id, fmt=query["format"]
        )
        response = HttpResponse(export.content, content_type=export.content_type)
        response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
        # The copy kept for the person, which still downloads once the session is deleted.
        response["Content-Location"] = selectors.export_url(export.filename)
        return response

    @extend_schema(parameters=[SESSION_ID], responses={200: serializers.CostOutput, **ERRORS})
    @action(detail=True, methods=["get"])
    def cost(self, request, id=None):
        return Response(sessions.session_cost(session_id=id, owner_id=request.user.id))

    @extend_schema(parameters=[SESSION_ID], responses={200: serializers.UsageOutput, **ERRORS})
    @action(detail=True, methods=["get"])
    def usage(self, request, id=None):
        return Response(sessions.session_usage(session_id=id, owner_id=request.user.id))

    @extend_schema(
        methods=["GET"],
        parameters=[SESSION_ID],
        request=None,
        responses={200: serializers.NoticeOutput(many=True), **ERRORS},
    )
    @extend_schema(
        methods=["POST"],
        parameters=[SESSION_ID],
        request=serializers.ProactiveInput,
        responses={201: serializers.NoticeOutput, 200: serializers.NoticeOutput, **ERRORS},
    )
    @action(detail=True, methods=["get", "post"])
    def proactive(self, request, id=None):
        if request.method == "GET":
            return Response(selectors.session_notices(session_id=id, owner_id=request.user.id))
        data = _parse(serializers.ProactiveInput, request.data)
        notice, created = notices.proactive_add(
            session_id=id,
            owner_id=request.user.id,
            message_id=data["message_id"],
            content=data["content"],
        )
        return Response(
            selectors.notice_to_api(notice),
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


@extend_schema(tags=["search"])
class SearchViewSet(ViewSet):
    """`GET /api/search/?q=`: the caller's own user and assistant messages, best first."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    throttle_classes = [SearchRateThrottle]

    @extend_schema(
        parameters=[serializers.SearchQuery],
        responses={
            200: serializers.SearchOutput,
            400: OpenApiResponse(serializers.ErrorOutput, description="bad q, limit or offset"),
            401: ERRORS[401],
            429: THROTTLED,
        },
    )
    def list(self, request):
        query = _parse(serializers.SearchQuery, request.query_params)
        return Response(
            selectors.search_messages(
                owner_id=request.user.id,
                query=query["q"],
                limit=query["limit"],
                offset=query["offset"],
            )
        )


@extend_schema(tags=["tools"])
class ToolsViewSet(ViewSet):
    """`GET /api/tools/`: every tool a turn may offer — built in and from the operator's MCP
    servers — with `needs_approval`, and the MCP servers' state (docs/design.md §31)."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]

    @extend_schema(responses={200: serializers.ToolsOutput, 401: ERRORS[401]})
    def list(self, request):
        return Response(selectors.tools_offered())


class ImportRefused(exceptions.APIException):
    status_code = status_of(Code.IMPORT_REFUSED)
    default_code = Code.IMPORT_REFUSED


class ImportOverBudget(ImportRefused):
    """More than one import takes (docs/design.md §27): nodes, depth, unpacked bytes, rows."""

    status_code = status_of(Code.IMPORT_TOO_LARGE)


def _import_too_large() -> ImportRefused:
    return ImportRefused(
        f"the file is larger than IMPORT_MAX_BYTES ({settings.IMPORT_MAX_BYTES} bytes)",
        code=Code.FILE_TOO_LARGE,
    )


@extend_schema(tags=["sessions"])
class HistoryImportView(APIView):
    """`POST /api/import/` (multipart): a ChatGPT export or an openai-agents database becomes
    sessions of the caller (docs/design.md §21); the answer is the import's report."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    throttle_classes = [ImportRateThrottle]

    @extend_schema(
        request={"multipart/form-data": serializers.HistoryImportInput},
        responses={
            200: serializers.HistoryImportOutput,
            400: OpenApiResponse(
                serializers.ErrorOutput,
                description="file_too_large, not_a_chatgpt_export, "
                "not_an_openai_agents_database (the detail says where), or invalid",
            ),
            401: ERRORS[401],
            413: OpenApiResponse(
                serializers.ErrorOutput,
                description="import_too_large: over IMPORT_MAX_NODES, IMPORT_MAX_DEPTH, "
                "IMPORT_MAX_UNPACKED_BYTES, the compression-ratio cap or the SQLite step budget "
                "(the detail names the limit); nothing imported",
            ),
            429: OpenApiResponse(
                serializers.ErrorOutput, description="throttled (IMPORT_THROTTLE_RATE)"
            ),
        },
    )
    def post(self, request):
        # Refused before the body is read when the client says how large it is.
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
        if declared > settings.IMPORT_MAX_BYTES + 64 * 1024:
            raise _import_too_large()
        data = _parse(serializers.HistoryImportInput, request.data)
        upload = data["file"]
        if upload.size > settings.IMPORT_MAX_BYTES:
            raise _import_too_large()
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "upload"
            with path.open("wb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
            source = data.get("source") or self._sniff(path)
            try:
                report = history_import(
                    owner_id=request.user.id, source=source, path=path, dry_run=data["dry_run"]
                )
            except ImportTooLarge as error:
                raise ImportOverBudget(str(error), code=error.code) from error
            except ForeignFormatInvalid as error:
                raise ImportRefused(str(error), code=error.code) from error
        return Response(report.to_api())

    @staticmethod
    def _sniff(path: Path) -> str:
        with path.open("rb") as file:
            return "openai-agents" if file.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC else "chatgpt"
