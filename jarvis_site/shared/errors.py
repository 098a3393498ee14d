"""The one table of error codes: every `code` the HTTP API, the WebSocket's error frames and
the slash commands answer with is a member of `Code`, and its HTTP status and the message a
person reads when the caller has nothing more precise to say are in `TABLE` (docs/design.md
§7, §8; docs/api.md lists them for clients).

No code is typed as a string anywhere else: a domain exception derives from `DomainError` and
names its code here (`code = Code.NOT_FOUND`). Each door maps a `DomainError` once, the same way
for every one of them: the API's exception handler answers the table's status with
{"code", "detail"}, the WebSocket consumer sends an `error` frame {code, message}, and a slash
command's refusal is that frame too; so the same mistake has the same code through every door. `tests/sessions_app/core/test_errors.py` reads every
module for a code written as a string in an error's place and fails on it.

`Code` is a `StrEnum`: a member is the plain string on the wire (`json.dumps`, DRF, frames).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Code(StrEnum):
    BAD_REQUEST = "bad_request"
    INVALID = "invalid"
    BAD_ID = "bad_id"
    RESERVED_ID = "reserved_id"
    UNKNOWN_AGENT = "unknown_agent"
    BAD_MODEL = "bad_model"
    UNKNOWN_COMMAND = "unknown_command"
    URL_NOT_ALLOWED = "url_not_allowed"
    CONFIRMATION_MISMATCH = "confirmation_mismatch"
    IMPORT_REFUSED = "import_refused"
    NOT_A_CHATGPT_EXPORT = "not_a_chatgpt_export"
    NOT_AN_OPENAI_AGENTS_DATABASE = "not_an_openai_agents_database"
    FILE_TOO_LARGE = "file_too_large"
    NOT_AUTHENTICATED = "not_authenticated"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    AGENT_MISMATCH = "agent_mismatch"
    ID_UNAVAILABLE = "id_unavailable"
    SESSION_CONNECTED = "session_connected"
    SESSION_BUSY = "session_busy"
    QUEUE_FULL = "queue_full"
    NOTHING_TO_COMPACT = "nothing_to_compact"
    HISTORY_INVALID = "history_invalid"
    APPROVAL_CLOSED = "approval_closed"
    LENGTH_REQUIRED = "length_required"
    TOO_LARGE = "too_large"
    IMPORT_TOO_LARGE = "import_too_large"
    QUOTA_EXCEEDED = "quota_exceeded"
    UNSUPPORTED_FILE = "unsupported_file"
    IMAGE_TOO_LARGE = "image_too_large"
    UNKNOWN_ATTACHMENT = "unknown_attachment"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    THROTTLED = "throttled"
    TOO_MANY_TURNS = "too_many_turns"
    TOO_MANY_SCHEDULES = "too_many_schedules"
    TOO_MANY_GOALS = "too_many_goals"
    TOO_MANY_SUBSCRIPTIONS = "too_many_subscriptions"
    SERVER_ERROR = "server_error"
    DRAINING = "draining"
    DATABASE_UNAVAILABLE = "database_unavailable"
    # A turn's outcome, not a refused request: the answer is 200 (or a `turn_end` frame) whose
    # status is `error` and whose `code` says why.
    TURN_FAILED = "turn_failed"
    CONTEXT_TOO_LONG = "context_too_long"


@dataclass(frozen=True)
class Rule:
    status: int  # the HTTP status; a WebSocket error frame and a command carry the code only
    detail: str  # what a person reads when the caller has nothing more precise


TABLE: dict[Code, Rule] = {
    Code.BAD_REQUEST: Rule(400, "the request cannot be read"),
    Code.INVALID: Rule(400, "the input is not valid"),
    Code.BAD_ID: Rule(400, "not a valid session id"),
    Code.RESERVED_ID: Rule(400, "ids starting with agent_ are the server's"),
    Code.UNKNOWN_AGENT: Rule(400, "no such agent"),
    Code.BAD_MODEL: Rule(400, "not a model this server can use"),
    Code.UNKNOWN_COMMAND: Rule(400, "unknown command; /help lists them"),
    Code.URL_NOT_ALLOWED: Rule(400, "this URL may not be sent to"),
    Code.CONFIRMATION_MISMATCH: Rule(400, "the confirmation does not match"),
    Code.IMPORT_REFUSED: Rule(400, "the file cannot be imported"),
    Code.NOT_A_CHATGPT_EXPORT: Rule(400, "not a ChatGPT export"),
    Code.NOT_AN_OPENAI_AGENTS_DATABASE: Rule(400, "not an openai-agents database"),
    Code.FILE_TOO_LARGE: Rule(400, "the file is too large"),
    Code.NOT_AUTHENTICATED: Rule(401, "sign in first"),
    Code.PERMISSION_DENIED: Rule(403, "not allowed"),
    Code.NOT_FOUND: Rule(404, "no such session"),
    Code.METHOD_NOT_ALLOWED: Rule(405, "this path does not take that method"),
    Code.AGENT_MISMATCH: Rule(409, "the session exists with another agent"),
    Code.ID_UNAVAILABLE: Rule(409, "this id is taken"),
    Code.SESSION_CONNECTED: Rule(409, "a live connection is using the session"),
    Code.SESSION_BUSY: Rule(409, "a turn of this session is running"),
    Code.QUEUE_FULL: Rule(409, "too many prompts already wait for this session"),
    Code.NOTHING_TO_COMPACT: Rule(409, "nothing to compact yet"),
    Code.HISTORY_INVALID: Rule(409, "the stored history would be refused by the provider"),
    Code.APPROVAL_CLOSED: Rule(409, "this approval is no longer open"),
    Code.LENGTH_REQUIRED: Rule(411, "send the body with a Content-Length"),
    Code.TOO_LARGE: Rule(413, "the request is too large"),
    Code.IMPORT_TOO_LARGE: Rule(413, "the import is larger than an import may be"),
    Code.QUOTA_EXCEEDED: Rule(413, "your files use all the storage you have"),
    Code.UNSUPPORTED_FILE: Rule(415, "not an image, a text or a PDF"),
    Code.IMAGE_TOO_LARGE: Rule(400, "the image has too many pixels"),
    Code.UNKNOWN_ATTACHMENT: Rule(404, "no such file in this session"),
    Code.UNSUPPORTED_MEDIA_TYPE: Rule(415, "a body of this type is not read here"),
    Code.THROTTLED: Rule(429, "too many requests; try again later"),
    Code.TOO_MANY_TURNS: Rule(429, "too many turns are running"),
    Code.TOO_MANY_SCHEDULES: Rule(429, "too many active schedules"),
    Code.TOO_MANY_GOALS: Rule(429, "too many goals are active or paused"),
    Code.TOO_MANY_SUBSCRIPTIONS: Rule(429, "too many push subscriptions"),
    Code.SERVER_ERROR: Rule(500, "the server failed; the error is in its log"),
    Code.DRAINING: Rule(503, "this worker is restarting; send it again"),
    Code.DATABASE_UNAVAILABLE: Rule(503, "the database cannot be reached now; try again shortly"),
    Code.TURN_FAILED: Rule(200, "the turn failed; the error is in the server log"),
    Code.CONTEXT_TOO_LONG: Rule(200, "the conversation is longer than the model can read"),
}

# Statuses Django and DRF answer on their own, before any code of ours runs (the API's
# middleware gives them the JSON body of every other error).
CODE_OF_STATUS: dict[int, Code] = {
    400: Code.BAD_REQUEST,
    401: Code.NOT_AUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    404: Code.NOT_FOUND,
    405: Code.METHOD_NOT_ALLOWED,
    411: Code.LENGTH_REQUIRED,
    413: Code.TOO_LARGE,
    415: Code.UNSUPPORTED_MEDIA_TYPE,
    429: Code.THROTTLED,
    500: Code.SERVER_ERROR,
}


def status_of(code: Code) -> int:
    return TABLE[code].status


def detail_of(code: Code) -> str:
    return TABLE[code].detail


class DomainError(Exception):
    """A request the domain refuses, carrying its code (a member of `Code`).

    `detail` is what the person reads: the exception's own text, or the table's when it was
    raised with none (or with only an id, as `SessionNotFound` is)."""

    code: Code = Code.INVALID

    @property
    def detail(self) -> str:
        return str(self) or detail_of(self.code)
