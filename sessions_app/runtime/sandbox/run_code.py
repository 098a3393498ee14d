"""The `run_code` tool (docs/design.md §28): Python or bash on the session's workspace.

Its result is JSON: `{exit_code, stdout, stderr, truncated, duration_ms, killed, files}`,
`files` being what the run created or changed (`{path, id, mime, size}`; `id` is the blob's
SHA-256, downloadable like an uploaded file). The result entry's `data` keeps the same
files (an image's width and height too: a model that sees images is shown them) and the
workspace changes (`data.workspace`, sandbox.workspace). What was not kept, and why (a
symbolic link, the workspace limit, the quota), is said at the end of `stderr`.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from sessions_app.runtime.loop.executors import in_pool
from sessions_app.runtime.sandbox.base import (
    LANGUAGES,
    RUN_CODE,
    HandedFile,
    RunLimits,
    RunOutcome,
    RunSpec,
)
from sessions_app.runtime.sandbox.bwrap import scratch_root
from sessions_app.runtime.sandbox.registry import sandbox_backend, sandbox_status
from sessions_app.runtime.sandbox.slots import SLOTS
from sessions_app.runtime.sandbox.workspace import (
    Collected,
    attachments_copy,
    attachments_of_session,
    collect,
    handed_files,
    manifest_as_of,
    scratch_remove,
)
from sessions_app.runtime.tools.base import (
    ABORTED_RESULT_TEXT,
    Tool,
    ToolAborted,
    ToolContext,
    ToolOutput,
)
from sessions_app.store import get_store

MAX_CODE_CHARS = 100_000
API_FILE_KEYS = ("path", "id", "mime", "size")


def _checked(arguments: dict) -> tuple[str, str, float | None]:
    language = arguments.get("language", "python")
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, not {language!r:.40}")
    code = arguments.get("code")
    if not isinstance(code, str) or not code.strip():
        raise ValueError("code must be a non-empty string")
    if len(code) > MAX_CODE_CHARS or "\x00" in code:
        raise ValueError(f"code must be at most {MAX_CODE_CHARS} characters, without NUL")
    timeout = arguments.get("timeout_sec")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError("timeout_sec must be a positive number of seconds")
        timeout = float(timeout)
    return language, code, timeout


@dataclass(frozen=True)
class _Prepared:
    owner_id: int | None
    files: dict[str, HandedFile]
    attachments: Path


def _prepare(session_id: str, scratch: Path) -> _Prepared:
    """The session's workspace as of now (its blobs, handed to the sandbox as they are), and
    its attachments, copied into `scratch`."""
    store = get_store()
    meta = store.get_meta(session_id)
    entries = store.get_messages(session_id)
    manifest, _ = manifest_as_of(entries)
    return _Prepared(
        owner_id=meta.owner_id if meta else None,
        files=handed_files(manifest),
        attachments=attachments_copy(scratch, attachments_of_session(entries)),
    )


def _store(context: ToolContext, prepared: _Prepared, outcome: RunOutcome) -> Collected:
    # Fenced: the links are written only while the session is the one the turn started on.
    try:
        with context.fenced():
            return collect(
                outcome.workspace,
                prepared.files,
                session_id=context.session_id,
                owner_id=prepared.owner_id,
            )
    finally:
        outcome.workspace.close()


async def run_code(context: ToolContext, arguments: dict) -> ToolOutput:
    language, code, timeout = _checked(arguments)
    status = sandbox_status()
    if not status.offered:
        raise RuntimeError(f"no sandbox on this server: {status.reason}")
    if not await SLOTS.acquire(context.abort):
        raise ToolAborted(ABORTED_RESULT_TEXT)
    try:
        scratch = Path(tempfile.mkdtemp(prefix="jarvis-run-", dir=scratch_root()))
        try:
            prepared = await in_pool("tools", _prepare, context.session_id, scratch)
            spec = RunSpec(
                language=language,
                code=code,
                limits=RunLimits.from_settings(timeout_sec=timeout),
                scratch=scratch,
                files=prepared.files,
                attachments=prepared.attachments,
            )
            outcome = await sandbox_backend().run(spec, abort=context.abort)
            if outcome.aborted:
                raise ToolAborted(ABORTED_RESULT_TEXT)
            collected = await in_pool("tools", _store, context, prepared, outcome)
        finally:
            await in_pool("tools", scratch_remove, scratch)
    finally:
        SLOTS.release()
    stderr = outcome.stderr
    if collected.notes:
        notes = "\n".join(f"[workspace] {note}" for note in collected.notes)
        stderr = f"{stderr}\n{notes}" if stderr and not stderr.endswith("\n") else stderr + notes
    result = {
        "exit_code": outcome.exit_code,
        "stdout": outcome.stdout,
        "stderr": stderr,
        "truncated": outcome.truncated,
        "duration_ms": outcome.duration_ms,
        "killed": outcome.killed,
        "files": [{key: file[key] for key in API_FILE_KEYS} for file in collected.files],
    }
    return ToolOutput(
        text=json.dumps(result, ensure_ascii=False),
        files=tuple(collected.files),
        data={"workspace": collected.changes} if collected.changes else {},
    )


RUN_CODE_TOOL = Tool(
    RUN_CODE,
    "Run Python 3 or bash code in an isolated sandbox whose working directory is this "
    "conversation's workspace: files written there are kept for later turns (a plot saved as "
    "PNG is shown to the person); files the person attached are read-only under "
    "attachments/. numpy, pandas, matplotlib and Pillow are installed; there is no network. "
    f"Limits: {settings.SANDBOX_WALL_SEC:g} s, {settings.SANDBOX_MEMORY_MB} MB. Returns JSON "
    "with exit_code, stdout, stderr, truncated, duration_ms, killed and files.",
    {
        "type": "object",
        "properties": {
            "language": {"type": "string", "enum": list(LANGUAGES)},
            "code": {"type": "string", "description": "the program's source"},
            "timeout_sec": {"type": "number", "description": "stop the run after this long"},
        },
        "required": ["language", "code"],
    },
    arun=run_code,
)
