"""What a `run_code` call costs beyond the program (docs/design.md §28), for `make bench`.

A `print(1)` run through the tool itself — the workspace read from the entries, its files
streamed into the run's /workspace, the run under bubblewrap, what changed streamed back and
stored, the scratch directory removed — on a workspace of 1 file and of 1,000 files,
interleaved with a bare `bwrap … python3 -c 'print(1)'` (the same namespaces, mounts and
limits the backend uses, nothing around them) in the same run. The difference of the medians is the overhead; the targets
(issue 53) are 40 ms for 1 file and 150 ms for 1,000.

Called from store_bench's child after django.setup() and the scratch database's migrations.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

# The overhead allowed beside the bare run, by workspace size (files).
OVERHEAD_TARGET_MS = {1: 40, 1000: 150}


def _workspace_of(store, session_id: str, files: int, run) -> None:
    """A session whose workspace holds `files` small files, kept as a run's result entry."""
    code = (
        "import os\nos.makedirs('data', exist_ok=True)\n"
        f"for i in range({files}):\n"
        "    open(f'data/{i:04d}.txt', 'w').write(f'row {i}\\n')\n"
    )
    output = run(code)
    assert json.loads(output.text)["exit_code"] == 0, output.text
    assert len(output.data["workspace"]) == files
    _keep(store, session_id, output)


def _keep(store, session_id: str, output) -> None:
    from sessions_app.store.base import NewEntry

    call_id = f"call_{uuid.uuid4().hex[:12]}"
    call = {"id": call_id, "name": "run_code", "arguments": "{}"}
    store.append(
        session_id,
        [
            NewEntry(role="assistant", tool_calls=[call]),
            NewEntry(
                role="tool",
                tool_call_id=call_id,
                name="run_code",
                content=output.text,
                data={"files": list(output.files)} | output.data,
            ),
        ],
    )


def _bare_command(backend, scratch: Path) -> list[str]:
    """The backend's own bwrap command for `print(1)`, its program swapped for `python3 -c`:
    the same namespaces, mounts and limits, with no files handed in or out."""
    from sessions_app.runtime.sandbox.base import RunLimits, RunSpec
    from sessions_app.runtime.sandbox.workspace import scratch_prepare

    attachments = scratch_prepare(scratch)  # as a run's: the sandbox's user may reach into it
    (scratch / "code").mkdir(mode=0o755)
    spec = RunSpec(
        language="python",
        code="print(1)\n",
        limits=RunLimits.from_settings(),
        scratch=scratch,
        attachments=attachments,
    )
    command = backend.command(spec, 1, 2)
    info = command.index("--info-fd")
    command[info : info + 2] = []  # nothing reads the report here
    python = command.index("-I")  # right after the sandbox's Python
    return [*command[:python], "-I", "-c", "print(1)"]


def sandbox_rows(runs: int) -> list[dict]:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from sessions_app.runtime.sandbox.bwrap import BwrapBackend, spawn_user
    from sessions_app.runtime.sandbox.registry import sandbox_status
    from sessions_app.runtime.sandbox.run_code import run_code
    from sessions_app.runtime.tools.base import ToolContext
    from sessions_app.store import get_store

    call_command("sandbox_setup", verbosity=0)
    status = sandbox_status()
    if not status.offered:
        return [{"operation": "run_code print(1)", "store": "no sandbox", "raw": status.reason}]
    store = get_store()
    owner_id = get_user_model().objects.create(username="bench-sandbox").id
    backend = BwrapBackend()
    rows = []
    # One event loop for every run, as in a worker (the tool's slots and a turn's abort
    # belong to the loop they were first awaited on).
    with (
        asyncio.Runner() as runner,
        tempfile.TemporaryDirectory(prefix="jarvis-bench-bwrap-") as scratch,
    ):
        bare = _bare_command(backend, Path(scratch))
        bare_run = lambda: subprocess.run(bare, capture_output=True, check=True, **spawn_user())  # noqa: E731
        assert bare_run().stdout == b"1\n"
        for files, target in OVERHEAD_TARGET_MS.items():
            session_id = f"bench-sandbox-{files}"
            store.create(session_id, owner_id=owner_id)
            context = ToolContext(session_id=session_id, owner_id=owner_id)

            def run(code, context=context):
                return runner.run(run_code(context, {"language": "python", "code": code}))

            _workspace_of(store, session_id, files, run)
            tool_run = lambda run=run: run("print(1)")  # noqa: E731
            assert json.loads(tool_run().text)["stdout"] == "1\n"
            tool_times, bare_times = [], []
            for index in range(runs):
                steps = ((tool_run, tool_times), (bare_run, bare_times))
                for step, times in steps if index % 2 == 0 else steps[::-1]:
                    started = time.perf_counter_ns()
                    step()
                    times.append(time.perf_counter_ns() - started)
            tool_ms = sorted(tool_times)[len(tool_times) // 2] / 1e6
            bare_ms = sorted(bare_times)[len(bare_times) // 2] / 1e6
            overhead = tool_ms - bare_ms
            rows.append(
                {
                    "operation": f"run_code print(1), workspace of {files:,} file"
                    + ("s" if files > 1 else "")
                    + f" (raw: bare bwrap; overhead {overhead:.1f} ms)",
                    "store": tool_ms,
                    "raw": bare_ms,
                    "ratio": tool_ms / bare_ms,
                    "target": f"overhead <= {target} ms",
                    "result": "ok" if overhead <= target else "MISSED",
                }
            )
    return rows
