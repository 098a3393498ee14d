"""The backend for hosts that cannot isolate code: it runs nothing, and says why."""

from __future__ import annotations

from sessions_app.runtime.sandbox.base import RunOutcome, RunSpec, SandboxBackend


class NoneBackend(SandboxBackend):
    name = "none"

    def __init__(self, reason: str = "SANDBOX_BACKEND is none: this server runs no code"):
        self.reason = reason

    def unavailable(self) -> str | None:
        return self.reason

    async def run(self, spec: RunSpec, *, abort) -> RunOutcome:
        raise RuntimeError(self.reason)
