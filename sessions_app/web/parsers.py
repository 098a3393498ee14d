"""The API's JSON parser: bounded in size and in nesting depth.

DRF's own parser streams the body straight into `json.load`, so Django's
DATA_UPLOAD_MAX_MEMORY_SIZE (enforced only by `request.body` and form parsing) never applies
to JSON, and a deeply nested document ends in RecursionError, a 500. This one reads at most
one byte more than the limit and measures nesting before it parses. A body with NUL or a
lone surrogate in any of its strings (keys too) is refused whole (400 `invalid`); the
top-level fields' own serializers word it for theirs.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework import exceptions
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json

from jarvis_site.shared.errors import Code, status_of
from sessions_app.core import limits

# A multipart form carries its boundaries and other fields around the file: what an upload's
# body may take beyond the file's own limit.
MULTIPART_ALLOWANCE = 64 * 1024


class RequestTooLarge(exceptions.APIException):
    status_code = status_of(Code.TOO_LARGE)
    default_code = Code.TOO_LARGE
    default_detail = "the request body is too large"


def body_limit() -> int | None:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def too_large() -> RequestTooLarge:
    return RequestTooLarge(f"the request body is larger than {body_limit()} bytes")


class LimitedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        if stream is None:
            return None
        limit = body_limit()
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise too_large()
        encoding = get_encoding(parser_context or {})
        try:
            text = raw.decode(encoding)
        except UnicodeError as error:
            raise exceptions.ParseError(f"JSON parse error - {error}") from error
        try:
            if limits.json_too_deep(text):
                raise exceptions.ParseError(
                    f"JSON may nest at most {limits.JSON_MAX_DEPTH} levels deep",
                    code=Code.BAD_REQUEST,
                )
            parse_constant = json.strict_constant if self.strict else None
            document = json.loads(text, parse_constant=parse_constant)
        except ValueError as error:
            raise exceptions.ParseError(f"JSON parse error - {error}") from error
        return _storable(document)


def _storable(document):
    """The body, when no string in it holds NUL or a lone surrogate; else 400 invalid, as on
    the WebSocket. PostgreSQL cannot store them, and SQLite would keep what a later move to
    PostgreSQL refuses. A top-level string field is left to its serializer field, which
    refuses both in that field's own words (every input field is a CharField or checks
    through sessions_app.core.limits); its keys, and everything nested, are checked here."""
    if not isinstance(document, dict):
        return limits.document_storable_check(document, name="body")
    for key, value in document.items():
        limits.storable_check(key, name="a key of body")
        if not isinstance(value, str):
            limits.document_storable_check(value, name=f"body.{key}")
    return document
