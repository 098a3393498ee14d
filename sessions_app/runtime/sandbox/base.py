"""What every sandbox backend answers, and the shapes a run goes in and comes out as.

A backend runs one program (Python or bash source) on a host directory that becomes its
workspace, within `RunLimits`, and never runs it unisolated: a backend that cannot isolate
says why in `unavailable()` and `run_code` is then not offered at all. `bwrap` runs it on
this machine; a container backend (docs/sandbox.md) would run it on another one, copying the
workspace there and back, behind the same two methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

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
    file_bytes: int  # the largest file a run may write
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
            network=settings.SANDBOX_NETWORK,
        )


@dataclass(frozen=True)
class RunSpec:
    """One run: `workspace` is the host directory the program sees as its working directory
    (`/workspace`, the only writable place besides a private `/tmp`); `attachments`, when
    given, appears read-only at `/workspace/attachments`."""

    language: str
    code: str
    workspace: Path
    limits: RunLimits
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
        is gone when this returns."""
