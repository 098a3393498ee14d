"""What every sandbox backend answers, and the shapes a run goes in and comes out as.

A backend runs one program (Python or bash source) on the session's files — handed to it as
`{path: (sha256, size)}` of blobs — within `RunLimits`, and returns what the program left in
its workspace (`pack.Returned`); it never runs a program unisolated: a backend that cannot
isolate says why in `unavailable()` and `run_code` is then not offered at all. `bwrap` runs
it on this machine; a container backend (docs/sandbox.md) would run it on another one,
sending the files there and back, behind the same two methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from django.conf import settings

from sessions_app.runtime.providers.offline import RUN_CODE as OFFLINE_RUN_CODE

# The tool's name (sandbox.run_code); the offline model calls it by the same one.
RUN_CODE = OFFLINE_RUN_CODE
LANGUAGES = ("python", "bash")
# How a run ended when the sandbox ended it (docs/design.md §28), else None.
KILLED_TIMEOUT, KILLED_MEMORY, KILLED_OUTPUT = "timeout", "memory", "output"


@dataclass(frozen=True)
class RunLimits:
    cpu_sec: int
    wall_sec: float
    memory_mb: int
    max_procs: int
    output_bytes: int  # per stream, kept in the result; the rest is dropped
    file_bytes: int  # the largest file a run may write, and all its workspace may hold
    tmp_bytes: int  # what its /tmp may hold
    network: bool

    @classmethod
    def from_settings(cls, *, timeout_sec: float | None = None) -> RunLimits:
        """The configured limits; a call's `timeout_sec` may only ask for less time."""
        wall = settings.SANDBOX_WALL_SEC
        if timeout_sec is not None:
            wall = min(wall, timeout_sec)
        return cls(
            cpu_sec=settings.SANDBOX_CPU_SEC,
            wall_sec=wall,
            memory_mb=settings.SANDBOX_MEMORY_MB,
            max_procs=settings.SANDBOX_MAX_PROCS,
            output_bytes=settings.SANDBOX_OUTPUT_BYTES,
            file_bytes=settings.SANDBOX_WORKSPACE_MAX_BYTES,
            tmp_bytes=settings.SANDBOX_TMP_MAX_BYTES,
            network=settings.SANDBOX_NETWORK,
        )


@dataclass(frozen=True)
class HandedFile:
    """A file of the workspace as a run gets it: its blob and the blob's size."""

    sha256: str
    size: int


@dataclass(frozen=True)
class RunSpec:
    """One run: `files` become the program's working directory (`/workspace`, the only
    writable place besides a private `/tmp`); `attachments`, a host directory when given,
    appears read-only at `/workspace/attachments`. `scratch` is a host directory the backend
    may use for the run (its code, the files coming back); the caller removes it."""

    language: str
    code: str
    limits: RunLimits
    scratch: Path
    files: dict[str, HandedFile] = field(default_factory=dict)
    attachments: Path | None = None


@dataclass(frozen=True)
class RunOutcome:
    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    duration_ms: int
    killed: str | None = None  # KILLED_* when the sandbox ended the run
    aborted: bool = False  # the person stopped the turn; the run's process tree is gone
    # What the workspace came back as (pack.Returned: the caller keeps or drops its files,
    # then closes it); None when the run was aborted.
    workspace: Any = None


class SandboxBackend(ABC):
    name: ClassVar[str]

    @abstractmethod
    def unavailable(self) -> str | None:
        """Why this backend cannot run code here (a sentence for /readyz and the page), or
        None when it can. Cheap: the start probe (sandbox.probe) checks the isolation."""

    @abstractmethod
    async def run(self, spec: RunSpec, *, abort) -> RunOutcome:
        """Run `spec` to its end, its limits or `abort` (runtime.tools.TurnAbort), whichever
        comes first, without blocking the event loop; on a Stop every process of the run
        is gone when this returns. The outcome's `workspace` says what the run left."""
