"""Keeping a turn's requests within its model's window (docs/design.md §22).

Before every model call of a turn (each step of a tool loop too) the request is counted;
one that would not fit `window − reserve` is preceded by an automatic compaction (reason
`auto`) that keeps the newest COMPACTION_KEEP_RECENT_TOKENS verbatim. A request the
provider still refuses for its length is compacted once more, as far as a cut can go (the
current turn alone, reason `overflow`), and sent again once; a second refusal ends the
turn with ContextTooLong. Never a loop: one retry per call, and a compaction only when it
leaves something out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from django.conf import settings

from jarvis_site.shared.errors import Code
from sessions_app.runtime.context.attachments import attachments_tokens
from sessions_app.runtime.context.compaction import (
    SUMMARY_INSTRUCTIONS,
    compaction_plan,
    compaction_store,
    summarize_async,
    summary_piece_chars,
)
from sessions_app.runtime.context.context_window import (
    budget_for,
    corrected_tokens,
    correction_observe,
    request_tokens,
    text_tokens,
)
from sessions_app.runtime.context.history import attachments_of, tool_result_max_chars
from sessions_app.runtime.loop.executors import in_pool
from sessions_app.runtime.providers import ModelReply, Provider, ProviderError
from sessions_app.runtime.providers.base import AbortFlag
from sessions_app.runtime.providers.oneshot import calls_usage, question_entry
from sessions_app.store import EntryRecord


class ContextTooLong(ProviderError):
    """The provider refused the request for its length even after a compaction: the turn
    ends `error` with this code (docs/design.md §22)."""

    code = Code.CONTEXT_TOO_LONG

    def __init__(self, refusal: str):
        super().__init__(
            "the conversation is too long for the model even after compacting it "
            f"(the provider said: {refusal})"
        )


class SummaryStopped(Exception):
    """The turn was aborted while the model wrote a summary."""


class ContextFit:
    """One turn's keeper of its requests' size. `history` is the turn's list of entries
    (from the latest compaction on), which `on_stored` extends with what is stored here."""

    def __init__(
        self,
        *,
        provider: Provider,
        session_id: str,
        incarnation: str,
        turn_id: str,
        history: list[EntryRecord],
        request: dict,
        emit: Callable[[dict], None],
        on_stored: Callable[[list[EntryRecord]], None],
    ):
        self.provider = provider
        self.label = provider.label
        # (model, usage) of the summary calls of the compaction under way.
        self.summary_calls: list[tuple[str, dict]] = []
        self.budget = budget_for(provider.label)
        self.session_id = session_id
        self.incarnation = incarnation
        self.turn_id = turn_id
        self.history = history
        self.request = request  # system_prompt, tools, parameters of every call
        self.emit = emit
        self.on_stored = on_stored
        self.counted = 0  # the last request's count, for correcting the next ones
        self.abort: AbortFlag = threading.Event()  # the turn's, once `call` is made

    def body(self, entries: list[EntryRecord] | None = None) -> dict:
        return self.provider.request_body(entries=entries or self.history, **self.request)

    async def before_call(self) -> None:
        """Compact first when the next request would not fit (reason `auto`)."""
        body = self.body()
        # Counted once (the count walks every message and the tool schemas), corrected after.
        self.counted = request_tokens(self.label, body, corrected=False)
        if corrected_tokens(self.label, self.counted) <= self.budget.available:
            return
        keep = min(settings.COMPACTION_KEEP_RECENT_TOKENS, self.budget.available // 2)
        await self._compact("auto", keep_tokens=keep, body=body)

    async def call(self, **options) -> ModelReply:
        """The model's answer to the turn's next request (`options`: on_delta, abort),
        compacting first when it would not fit, and once more (then trying again once)
        when the provider refuses it for its length."""
        self.abort = options["abort"]
        await self.before_call()
        try:
            reply = await self._send(options)
        except ProviderError as refused:
            if not refused.length_refused:
                raise
            await self.after_refusal(refused)
            try:
                reply = await self._send(options)
            except ProviderError as again:
                if again.length_refused:
                    raise ContextTooLong(str(again)) from again
                raise
        # The provider's count of the request corrects the estimates of the next ones.
        correction_observe(
            self.label, counted=self.counted, reported=int(reply.usage.get("input_tokens") or 0)
        )
        return reply

    async def _send(self, options: dict) -> ModelReply:
        return await self.provider.acomplete(entries=self.history, **self.request, **options)

    async def after_refusal(self, failure: ProviderError) -> None:
        """Compact as far as a cut can go (reason `overflow`) after the provider refused the
        request for its length; ContextTooLong when nothing more can be left out."""
        body = self.body()
        if not await self._compact("overflow", keep_tokens=0, body=body):
            raise ContextTooLong(str(failure)) from failure
        self.counted = request_tokens(self.label, self.body(), corrected=False)

    def _entry_tokens(self, entry: EntryRecord) -> int:
        if entry.kind != "message":
            return 0
        text = entry.content
        if entry.role == "tool":
            text = text[: tool_result_max_chars()]  # what the projection sends of it
        calls = "".join(call["name"] + call["arguments"] for call in entry.tool_calls or ())
        files = attachments_tokens(attachments_of(entry))
        return text_tokens(self.label, text) + text_tokens(self.label, calls) + files

    async def _ask(self, text: str) -> str:
        reply = await self.provider.acomplete(
            entries=[question_entry(text)],
            system_prompt=SUMMARY_INSTRUCTIONS,
            tools=[],
            on_delta=lambda _piece: None,
            abort=self.abort,
        )
        # What the summary spends is the session's usage, kept on its entry (§22).
        self.summary_calls.append((reply.model or self.provider.model, dict(reply.usage or {})))
        if reply.stopped:
            # Stopped by the user mid-summary: what came is no summary; the extractive one
            # stands in and the turn ends as aborted at its next check.
            raise SummaryStopped
        return reply.text

    async def _compact(self, reason: str, *, keep_tokens: int, body: dict) -> bool:
        """Summarize what is before the cut and store the `compaction` entry; False when no
        cut leaves anything out."""
        plan = compaction_plan(self.history, keep_tokens=keep_tokens, count=self._entry_tokens)
        if plan is None:
            return False
        self.emit({"type": "compaction_start", "turn_id": self.turn_id, "reason": reason})
        offline = self.label == "offline"
        self.summary_calls = []
        summary = await summarize_async(
            plan, ask=None if offline else self._ask, piece_chars=summary_piece_chars(self.budget)
        )
        data = {"summary": summary, "first_kept_seq": plan.first_kept_seq}
        # What the request will count once the summary stands in for the older turns.
        preview = replace(
            self.history[-1], seq=self.history[-1].seq + 1, kind="compaction", data=data
        )
        tokens_after = request_tokens(self.label, self.body([*plan.kept, preview]))
        model, usage = calls_usage(self.summary_calls)
        record = await in_pool(
            "store",
            compaction_store,
            session_id=self.session_id,
            plan=plan,
            summary=summary,
            reason=reason,
            tokens_before=request_tokens(self.label, body),
            tokens_after=tokens_after,
            turn_id=self.turn_id,
            incarnation=self.incarnation,
            model=model,
            usage=usage,
        )
        self.on_stored([record])
        self.emit(
            {
                "type": "compaction_end",
                "turn_id": self.turn_id,
                "reason": reason,
                "seq": record.seq,
                "tokens_before": record.data["tokens_before"],
                "tokens_after": tokens_after,
            }
        )
        return True
