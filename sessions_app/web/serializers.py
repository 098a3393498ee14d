"""API input and output shapes (docs/design.md §7). Input serializers parse; output ones document.

No domain rules here: ids are validated by sessions_app.core.ids inside the services, so the API,
the WebSocket and the commands all refuse the same ids with the same message.
"""

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from sessions_app.core import limits
from sessions_app.selectors import (
    SEARCH_OFFSET_MAX,
    SEARCH_PAGE_DEFAULT,
    SEARCH_PAGE_MAX,
    SEARCH_QUERY_MAX_CHARS,
)
from sessions_app.services import prompt_modes
from sessions_app.services.sessions import EXPORT_FORMATS
from sessions_app.store.base import THINKING_LEVELS

# What the OpenAPI schema says a session id is (docs/design.md §6); sessions_app.core.ids checks.
SESSION_ID_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "pattern": r"^[A-Za-z0-9_:\-][A-Za-z0-9_.:\-]*$",
}


@extend_schema_field(SESSION_ID_SCHEMA)
class SessionIdField(serializers.CharField):
    """A session id in a body: described with its pattern, validated by the services."""

    def to_internal_value(self, data):
        # CharField would take 0 as "0": the schema says string.
        if not isinstance(data, str):
            raise serializers.ValidationError("Not a valid string.")
        return super().to_internal_value(data)


# What the schema says a model is; the service checks it (400 bad_model, as /model answers).
MODEL_SPEC_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "pattern": r"^(offline|(openai|anthropic):\S+)$",
}


@extend_schema_field(MODEL_SPEC_SCHEMA)
class ModelSpecField(serializers.CharField):
    """A model in a body: described with its pattern, checked by the service, so the API and
    the /model command refuse a model with the same code and the same words."""

    def run_validation(self, data=serializers.empty):
        # Every string, "" and over-long ones included, goes to the service's check.
        if isinstance(data, str):
            return data
        return super().run_validation(data)


# --- input --------------------------------------------------------------------------------


class JsonBooleanField(serializers.BooleanField):
    """true or false, and nothing DRF would read as one (0, "yes"): the schema says boolean."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class LimitedText(serializers.CharField):
    """Text checked by one of sessions_app.core.limits' checks and by nothing else, so that the API
    refuses exactly what the WebSocket and the chat command refuse (length, NUL, lone
    surrogates), with the same words. Counted as sent: no whitespace trimming.

    `max_length` (and a `min_length` of 1 unless blank is allowed) are for the OpenAPI schema
    only: the check enforces them, so the field's own validators never run.
    """

    def __init__(self, *, check, not_text: str = "Not a valid string.", **kwargs):
        self.check = check
        self.not_text = not_text
        if not kwargs.get("allow_blank", False):
            kwargs.setdefault("min_length", 1)
        super().__init__(trim_whitespace=False, **kwargs)

    def run_validators(self, value):
        pass

    def run_validation(self, data=serializers.empty):
        # CharField answers "" with its own words; the check has them.
        if data == "" and self.allow_blank:
            return ""
        return serializers.Field.run_validation(self, data)

    def to_internal_value(self, data):
        # CharField would take 5 as "5": the schema says string, and so does the WebSocket.
        if not isinstance(data, str):
            raise serializers.ValidationError(self.not_text)
        try:
            return self.check(data)
        except limits.InputInvalid as error:
            raise serializers.ValidationError(str(error)) from error


class SessionCreateInput(serializers.Serializer):
    id = SessionIdField(required=False, allow_blank=False, trim_whitespace=False)
    agent = LimitedText(
        check=limits.agent_check,
        required=False,
        default="jarvis",
        max_length=limits.AGENT_MAX_CHARS,
    )
    title = LimitedText(
        check=limits.title_check,
        required=False,
        default="",
        allow_blank=True,
        max_length=limits.TITLE_MAX_CHARS,
    )


SESSION_PAGE_MAX = 1000


class SessionListQuery(serializers.Serializer):
    agent = LimitedText(check=limits.agent_check, required=False, max_length=limits.AGENT_MAX_CHARS)
    include_tests = serializers.BooleanField(required=False, default=True)
    include_subagents = serializers.BooleanField(
        required=False, default=False, help_text="also list the sessions sub-agents work in"
    )
    archived = serializers.BooleanField(
        required=False, default=False, help_text="the archived sessions instead of the others"
    )
    # One answer is bounded whatever the account holds; `offset` pages through the rest.
    limit = serializers.IntegerField(
        required=False,
        default=SESSION_PAGE_MAX,
        min_value=1,
        max_value=SESSION_PAGE_MAX,
        help_text=f"at most this many sessions (default and maximum {SESSION_PAGE_MAX})",
    )
    offset = serializers.IntegerField(
        required=False, default=0, min_value=0, help_text="skip this many first"
    )


class SessionPatchInput(serializers.Serializer):
    model = ModelSpecField(
        required=False,
        help_text="offline, openai:<model> or anthropic:<model>",
    )
    thinking = serializers.ChoiceField(
        required=False,
        choices=list(THINKING_LEVELS),
        help_text="how hard the model thinks from the next turn on",
    )
    title = LimitedText(
        check=limits.renamed_title_check,
        required=False,
        max_length=limits.TITLE_MAX_CHARS,
        help_text="rename the session",
    )
    pinned = JsonBooleanField(required=False, help_text="listed first")
    archived = JsonBooleanField(
        required=False, help_text="left out of the list unless ?archived=true"
    )

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError(
                "give at least one of model, thinking, title, pinned, archived"
            )
        return attrs


class EntriesQuery(serializers.Serializer):
    after_seq = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=limits.SEQ_MAX,
        help_text="entries after this seq, oldest first (default 0: from the start)",
    )
    before_seq = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=limits.SEQ_MAX,
        help_text="the latest entries before this seq (scrolling back), in seq order; with "
        "after_seq, only those after it too",
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000)


class ContextQuery(serializers.Serializer):
    format = serializers.ChoiceField(choices=["openai", "anthropic"], default="openai")
    tokens_only = serializers.BooleanField(
        default=False, help_text="answer with `tokens` alone, without the messages (the meter)"
    )


class ExportQuery(serializers.Serializer):
    format = serializers.ChoiceField(choices=list(EXPORT_FORMATS), default="md")


class MessageInput(serializers.Serializer):
    text = LimitedText(
        check=limits.prompt_check,
        not_text=prompt_modes.PROMPT_NOT_TEXT,
        error_messages={"null": prompt_modes.PROMPT_NOT_TEXT},
        max_length=limits.PROMPT_MAX_CHARS,
    )
    # docs/design.md §18: what to do when a turn is running; absent is `reject`.
    mode = serializers.ChoiceField(
        choices=["queue", "steer", "interrupt", "reject"], required=False, default="reject"
    )
    # docs/design.md §23: files uploaded to the session, sent with this prompt (mode reject).
    attachments = serializers.ListField(
        child=serializers.RegexField(r"^[0-9a-f]{64}$", max_length=64),
        required=False,
        max_length=20,
        help_text="ids of files uploaded to this session (POST …/files/)",
    )


class BranchInput(serializers.Serializer):
    id = SessionIdField(required=False, allow_blank=False, trim_whitespace=False)
    at_seq = serializers.IntegerField(required=False, min_value=0, max_value=limits.SEQ_MAX)


class ApprovalInput(serializers.Serializer):
    allow = serializers.BooleanField(help_text="true runs the call, false refuses it")


class ProactiveInput(serializers.Serializer):
    message_id = LimitedText(check=limits.message_id_check, max_length=limits.MESSAGE_ID_MAX_CHARS)
    content = LimitedText(
        check=limits.notice_check, allow_blank=True, max_length=limits.NOTICE_MAX_CHARS
    )


# --- output -------------------------------------------------------------------------------


class SessionOutput(serializers.Serializer):
    id = SessionIdField()
    agent = serializers.CharField()
    title = serializers.CharField(allow_blank=True)
    parent_id = SessionIdField(allow_null=True)
    branched_at_seq = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    last_seq = serializers.IntegerField()
    model = serializers.CharField(
        allow_blank=True, help_text='the model set with /model or PATCH; "" = default'
    )
    spawned_by = serializers.CharField(
        allow_null=True, help_text="the session whose delegate call made this sub-agent session"
    )
    thinking = serializers.ChoiceField(
        choices=list(THINKING_LEVELS), help_text="set with /think or PATCH"
    )
    pinned = serializers.BooleanField(help_text="listed first")
    archived = serializers.BooleanField(help_text="listed only with ?archived=true")


class TreeNodeOutput(serializers.Serializer):
    id = SessionIdField()
    title = serializers.CharField(allow_blank=True)
    parent_id = SessionIdField(allow_null=True)
    branched_at_seq = serializers.IntegerField(allow_null=True)
    children = serializers.ListField(
        child=serializers.DictField(), help_text="nodes of the same shape, oldest first"
    )
    truncated = serializers.BooleanField(
        required=False, help_text="present when a chain this deep was cut here"
    )


class SessionDetailOutput(SessionOutput):
    entry_counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="total, per kind, and messages per role (message.user, ...)",
    )


class ToolCallOutput(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    arguments = serializers.CharField(help_text="a JSON string")


class EntryOutput(serializers.Serializer):
    # Fields an entry's kind does not use are "" or null (a turn_start has no role).
    seq = serializers.IntegerField()
    kind = serializers.CharField()
    role = serializers.CharField(allow_blank=True)
    content = serializers.CharField(allow_blank=True)
    tool_calls = ToolCallOutput(many=True, allow_null=True)
    tool_call_id = serializers.CharField(allow_blank=True)
    name = serializers.CharField(allow_blank=True)
    is_error = serializers.BooleanField()
    model = serializers.CharField(allow_blank=True)
    usage = serializers.DictField(allow_null=True)
    turn_id = serializers.CharField(allow_blank=True)
    data = serializers.DictField(allow_null=True)
    created_at = serializers.DateTimeField()
    v = serializers.IntegerField(help_text="the entry's schema version (today 1)")


class EntriesOutput(serializers.Serializer):
    entries = EntryOutput(many=True)
    next_after_seq = serializers.IntegerField()
    next_before_seq = serializers.IntegerField(
        allow_null=True,
        help_text="the before_seq of the page before this one; null when none comes before it",
    )


class ContextTokensOutput(serializers.Serializer):
    used = serializers.IntegerField(help_text="tokens the next request's context takes")
    window = serializers.IntegerField(help_text="the session's model's context window")
    reserve = serializers.IntegerField(help_text="tokens kept free for the answer")


class ContextOutput(serializers.Serializer):
    format = serializers.ChoiceField(choices=["openai", "anthropic"])
    system = serializers.CharField(required=False, help_text="anthropic only")
    messages = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="left out with tokens_only"
    )
    tokens = ContextTokensOutput()


class TurnOutput(serializers.Serializer):
    turn_id = serializers.CharField()
    status = serializers.CharField()
    error = serializers.CharField(allow_blank=True, help_text='"" unless the turn failed')
    code = serializers.CharField(
        allow_blank=True,
        help_text='the error code of a failed turn that has one (context_too_long), else ""',
    )
    entries = EntryOutput(many=True)


class ModelCallOutput(serializers.Serializer):
    model = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    finish_reason = serializers.CharField(allow_null=True)
    usage = serializers.DictField(allow_null=True)


class ToolTimingOutput(serializers.Serializer):
    call_id = serializers.CharField()
    name = serializers.CharField()
    started_at = serializers.DateTimeField(
        allow_null=True, help_text="null for a call that never ran to its end"
    )
    duration_ms = serializers.IntegerField(allow_null=True)
    outcome = serializers.CharField(help_text="ok, error, or pending (no result yet)")


class TurnStepOutput(serializers.Serializer):
    model_call = ModelCallOutput()
    tools = ToolTimingOutput(many=True)


class TurnTimelineOutput(serializers.Serializer):
    turn_id = serializers.CharField()
    status = serializers.CharField(help_text="the turn_end's status, or running")
    started_at = serializers.DateTimeField()
    steps = TurnStepOutput(many=True)


class StepRequestOutput(serializers.Serializer):
    seq = serializers.IntegerField(help_text="the seq of the answer this request got")
    body = serializers.DictField(help_text="the request body, as the provider received it")


class TurnRequestsOutput(serializers.Serializer):
    turn_id = serializers.CharField()
    model = serializers.CharField(help_text="offline, openai:<model> or anthropic:<model>")
    requests = StepRequestOutput(many=True)


class ApprovalOutput(serializers.Serializer):
    call_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["allowed", "denied"])


class QueuedOutput(serializers.Serializer):
    queue_id = serializers.CharField()
    position = serializers.IntegerField(help_text="0 runs next")


class QueueCancelOutput(serializers.Serializer):
    queue_id = serializers.CharField()
    cancelled = serializers.BooleanField()


class AbortOutput(serializers.Serializer):
    aborted = serializers.BooleanField()


class KeptExportOutput(serializers.Serializer):
    filename = serializers.CharField()
    format = serializers.ChoiceField(choices=EXPORT_FORMATS)
    size = serializers.IntegerField()
    written_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    url = serializers.CharField(help_text="where it downloads, after the session's delete too")


class KeptExportsOutput(serializers.Serializer):
    exports = KeptExportOutput(many=True)


class DeleteOutput(serializers.Serializer):
    deleted = serializers.BooleanField()
    exports = KeptExportOutput(
        many=True, help_text="the session's export files, kept for their owner (§31)"
    )


class ModelCostOutput(serializers.Serializer):
    model = serializers.CharField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    usd = serializers.FloatField(allow_null=True)


class CostTotalOutput(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    usd = serializers.FloatField(allow_null=True, help_text="null when a model has no price")
    usd_known = serializers.FloatField(help_text="the cost of the models that have a price")


class CostOutput(serializers.Serializer):
    models = ModelCostOutput(many=True)
    total = CostTotalOutput()
    unpriced_models = serializers.ListField(child=serializers.CharField())


class UsageCountsOutput(serializers.Serializer):
    input_tokens = serializers.IntegerField(help_text="every input token, cached ones included")
    output_tokens = serializers.IntegerField(help_text="reasoning tokens included")
    cached_tokens = serializers.IntegerField(help_text="input tokens read from the cache")
    reasoning_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField(
        allow_null=True, help_text="null when a model in the sum has no price (MODEL_PRICES)"
    )


class UsagePartOutput(UsageCountsOutput):
    by_model = serializers.DictField(child=UsageCountsOutput(), help_text="per model")


class UsageOutput(UsagePartOutput):
    """The session's own calls at the top level (turns, summaries, consolidation)."""

    sub_agents = serializers.DictField(
        child=UsagePartOutput(), help_text="per sub-agent, the turns delegated from here"
    )
    inherited = UsagePartOutput(
        help_text="what a branch's copied entries carry: its parent's, never its own"
    )


class NoticeOutput(serializers.Serializer):
    message_id = serializers.CharField()
    content = serializers.CharField()
    created_at = serializers.DateTimeField()
    delivered_at = serializers.DateTimeField(allow_null=True)


class ErrorOutput(serializers.Serializer):
    code = serializers.CharField()
    detail = serializers.CharField()
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="code invalid only: the messages per input field",
    )


# --- search -------------------------------------------------------------------------------


class SearchQuery(serializers.Serializer):
    # CharField refuses NUL (and lone surrogate) characters on its own.
    q = serializers.CharField(
        max_length=SEARCH_QUERY_MAX_CHARS,
        trim_whitespace=True,
        help_text='words to find; "quoted words" together, `or` between alternatives, '
        "-word to exclude",
    )
    limit = serializers.IntegerField(
        required=False, default=SEARCH_PAGE_DEFAULT, min_value=1, max_value=SEARCH_PAGE_MAX
    )
    offset = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=SEARCH_OFFSET_MAX
    )


class SearchHitOutput(serializers.Serializer):
    session_id = SessionIdField()
    title = serializers.CharField(allow_blank=True)
    seq = serializers.IntegerField()
    role = serializers.ChoiceField(choices=["user", "assistant"])
    created_at = serializers.DateTimeField()
    rank = serializers.FloatField(help_text="higher is better; comparable within one query")
    snippet = serializers.CharField(
        help_text="HTML: the text is escaped, matched words are in <mark> (the only tags)"
    )


# The search view is a ViewSet's `list`, which drf-spectacular would document as an array;
# it answers one object, a page.
@extend_schema_serializer(many=False)
class SearchOutput(serializers.Serializer):
    query = serializers.CharField()
    hits = SearchHitOutput(many=True)
    next_offset = serializers.IntegerField(
        allow_null=True, help_text="the offset of the next page; null on the last one"
    )


class ToolOutput(serializers.Serializer):
    name = serializers.CharField(
        help_text="what the model calls it; MCP tools: mcp__<server>__<tool>"
    )
    description = serializers.CharField()
    parameters = serializers.DictField(help_text="the JSON schema of its arguments")
    needs_approval = serializers.BooleanField(
        help_text="a call waits for the person's yes or no (docs/design.md §15)"
    )
    source = serializers.ChoiceField(choices=["builtin", "mcp"])
    server = serializers.CharField(allow_null=True, help_text="the MCP server's name")


class McpServerOutput(serializers.Serializer):
    name = serializers.CharField()
    transport = serializers.CharField(
        help_text="stdio and the command's name, or http and host:port"
    )
    listed = serializers.BooleanField(help_text="whether this worker holds its tools' listing")
    error = serializers.CharField(allow_blank=True, help_text="why it last could not be reached")


class SandboxStatusOutput(serializers.Serializer):
    backend = serializers.CharField(help_text="bwrap or none (SANDBOX_BACKEND)")
    run_code = serializers.BooleanField(help_text="whether turns are offered run_code")
    reason = serializers.CharField(
        required=False, help_text="why run_code is not offered (absent when it is)"
    )


@extend_schema_serializer(many=False)
class ToolsOutput(serializers.Serializer):
    tools = ToolOutput(many=True)
    servers = McpServerOutput(many=True)
    sandbox = SandboxStatusOutput()


class HistoryImportInput(serializers.Serializer):
    file = serializers.FileField(
        help_text="a ChatGPT conversations.json (or the export's zip), or an openai-agents "
        "SQLiteSession database"
    )
    source = serializers.ChoiceField(
        choices=["chatgpt", "openai-agents"],
        required=False,
        help_text="what the file is; default: told by its first bytes",
    )
    dry_run = serializers.BooleanField(required=False, default=False)


class HistoryImportSessionOutput(serializers.Serializer):
    source_id = serializers.CharField()
    session_id = serializers.CharField(allow_null=True)
    imported = serializers.BooleanField(help_text="false: imported before, or refused (error)")
    entries = serializers.IntegerField()
    parent_id = serializers.CharField(allow_null=True)
    branched_at_seq = serializers.IntegerField(allow_null=True)
    notes = serializers.ListField(child=serializers.CharField(), help_text="what was dropped")
    error = serializers.CharField(allow_null=True)


class HistoryImportOutput(serializers.Serializer):
    source = serializers.CharField()
    dry_run = serializers.BooleanField()
    imported = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    failed = serializers.IntegerField()
    sessions = HistoryImportSessionOutput(many=True)


class FileUploadInput(serializers.Serializer):
    file = serializers.FileField(
        allow_empty_file=True,
        help_text="an image (PNG, JPEG, GIF, WebP), a UTF-8 text or a PDF; told by its bytes",
    )


class WorkspaceFileOutput(serializers.Serializer):
    path = serializers.CharField(help_text="where the file is in the workspace")
    id = serializers.CharField(help_text="the SHA-256 of the bytes (a blob, like a file's id)")
    mime = serializers.CharField()
    size = serializers.IntegerField()


class WorkspaceOutput(serializers.Serializer):
    as_of_seq = serializers.IntegerField(
        help_text="the seq of the entry that last changed the workspace; 0: never changed"
    )
    files = WorkspaceFileOutput(many=True)


class FileOutput(serializers.Serializer):
    id = serializers.CharField(help_text="the SHA-256 of the bytes: same bytes, same id")
    name = serializers.CharField()
    mime = serializers.CharField()
    size = serializers.IntegerField()
    width = serializers.IntegerField(required=False, help_text="images only")
    height = serializers.IntegerField(required=False, help_text="images only")
