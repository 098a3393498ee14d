"""What a share link shows (docs/design.md §24), and the owner's view of their links.

A share shows one session's conversation up to the link's `upto_seq`: the user's and the
assistant's messages, and tool calls with their results only when the link was made with
`include_tools`. Never the model's thinking, the session's id, its parent or branches, its
model, usage or settings: nothing but the conversation's words, its title and times, and
the files attached to a shown user message (their refs here; their bytes through
selectors/shared_files.py). Revoked, expired and unknown tokens are one and the same 404.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

from jarvis_site.shared.errors import Code, DomainError
from sessions_app.models import ShareLink
from sessions_app.store import EntryRecord, SessionMeta, get_store
from sessions_app.store.share_links import share_live_by_hash

# A token is 43 characters (token_urlsafe(32)); anything much longer is no token of ours,
# and is refused before it is hashed.
TOKEN_MAX_CHARS = 100


class ShareNotFound(DomainError):
    """No such share: unknown, revoked and expired alike (404 not_found)."""

    code = Code.NOT_FOUND

    def __init__(self):
        super().__init__("no such share")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def share_url(token: str) -> str:
    return f"/s/{token}"


def share_to_api(share: ShareLink) -> dict[str, Any]:
    return {
        "id": share.pk,
        "upto_seq": share.upto_seq,
        "include_tools": share.include_tools,
        "created_at": share.created_at.isoformat(),
        "expires_at": share.expires_at.isoformat() if share.expires_at else None,
    }


def share_resolve(token: str) -> tuple[ShareLink, SessionMeta]:
    """The live link of `token` and its session as the link was made for it."""
    if not isinstance(token, str) or not token or len(token) > TOKEN_MAX_CHARS:
        raise ShareNotFound()
    share = share_live_by_hash(token_hash(token))
    if share is None:
        raise ShareNotFound()
    meta = get_store().get_meta(share.session_id)
    if (
        meta is None
        or meta.incarnation != share.session_incarnation
        or meta.owner_id != share.owner_id
    ):
        raise ShareNotFound()
    return share, meta


def shared_entries(share: ShareLink) -> list[EntryRecord]:
    """The messages the link shows, in seq order (see the module's docstring)."""
    # Seqs start at 1 and have no gaps: at most `upto_seq` entries come at or before it.
    entries = get_store().get_messages(share.session_id, limit=max(1, share.upto_seq))
    messages = [
        entry
        for entry in entries
        if entry.seq <= share.upto_seq
        and entry.kind == "message"
        and entry.role in ("user", "assistant", "tool")
    ]
    if share.include_tools:
        return _answered_calls_only(messages)
    return [entry for entry in messages if entry.role != "tool" and entry.content.strip()]


# What the share shows of a file attached to a message: what the chat shows, never more.
ATTACHMENT_FIELDS = ("id", "name", "mime", "size", "width", "height")


def shared_attachments(entry: EntryRecord) -> list[dict[str, Any]]:
    """The refs of the files a user message carries (`data.attachments`, files §23)."""
    if entry.role != "user" or not isinstance(entry.data, dict):
        return []
    refs = entry.data.get("attachments")
    if not isinstance(refs, list):
        return []
    return [
        {field: ref[field] for field in ATTACHMENT_FIELDS if field in ref}
        for ref in refs
        if isinstance(ref, dict) and isinstance(ref.get("id"), str)
    ]


def _answered_calls_only(messages: list[EntryRecord]) -> list[EntryRecord]:
    """Tool calls shown with their results: a call cut off before its result by `upto_seq`
    is left out, so a copy of the share is a valid history."""
    answered = {entry.tool_call_id for entry in messages if entry.role == "tool"}
    called = {
        call["id"]
        for entry in messages
        for call in entry.tool_calls or ()
        if call["id"] in answered
    }
    kept = []
    for entry in messages:
        if entry.role == "tool" and entry.tool_call_id not in called:
            continue
        if entry.role == "assistant" and entry.tool_calls:
            calls = [call for call in entry.tool_calls if call["id"] in answered]
            if not calls and not entry.content.strip():
                continue
            if len(calls) != len(entry.tool_calls):
                entry = _with_calls(entry, calls)
        kept.append(entry)
    return kept


def _with_calls(entry: EntryRecord, calls: list[dict]) -> EntryRecord:
    return replace(entry, tool_calls=calls or None)


def shared_entry_to_api(entry: EntryRecord, *, include_tools: bool) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "seq": entry.seq,
        "role": entry.role,
        "content": entry.content,
        "created_at": entry.created_at.isoformat(),
    }
    attachments = shared_attachments(entry)
    if attachments:
        shown["data"] = {"attachments": attachments}
    if include_tools:
        shown["tool_calls"] = [
            {"id": call["id"], "name": call["name"], "arguments": call["arguments"]}
            for call in entry.tool_calls or ()
        ] or None
        shown["tool_call_id"] = entry.tool_call_id
        shown["name"] = entry.name
        shown["is_error"] = entry.is_error
    return shown


def shared_view(token: str) -> dict[str, Any]:
    """The JSON of `GET /api/shared/<token>/`."""
    share, meta = share_resolve(token)
    return {
        "title": meta.title,
        "upto_seq": share.upto_seq,
        "include_tools": share.include_tools,
        "shared_at": share.created_at.isoformat(),
        "entries": [
            shared_entry_to_api(entry, include_tools=share.include_tools)
            for entry in shared_entries(share)
        ],
    }
