"""Which sandbox this server runs code in, and whether `run_code` is offered.

SANDBOX_BACKEND names a backend of BACKENDS; empty picks `bwrap` where bubblewrap is
installed, else `none`. Whatever is picked, `run_code` is offered only once the start probe
(sandbox.probe) has seen the isolation hold: code is never run unsandboxed. The status is
found once per process (the server warms it at start; else the first turn pays the probe).
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass

from django.conf import settings

from sessions_app.runtime.sandbox.base import SandboxBackend
from sessions_app.runtime.sandbox.bwrap import BwrapBackend
from sessions_app.runtime.sandbox.none import NoneBackend

BACKENDS: dict[str, type[SandboxBackend]] = {
    BwrapBackend.name: BwrapBackend,
    NoneBackend.name: NoneBackend,
}


@dataclass(frozen=True)
class SandboxStatus:
    backend: str
    offered: bool
    reason: str = ""  # why run_code is not offered

    def to_api(self) -> dict:
        body = {"backend": self.backend, "run_code": self.offered}
        return body | ({"reason": self.reason} if self.reason else {})


_lock = threading.Lock()
_status: dict[tuple, SandboxStatus] = {}


def _settings_key() -> tuple:
    return (settings.SANDBOX_BACKEND, settings.SANDBOX_PYTHON, settings.SANDBOX_NETWORK)


def sandbox_backend() -> SandboxBackend:
    name = settings.SANDBOX_BACKEND
    if not name:
        if not shutil.which("bwrap"):
            return NoneBackend("bubblewrap is not installed (Debian: apt-get install bubblewrap)")
        name = BwrapBackend.name
    return BACKENDS[name]()


def sandbox_status() -> SandboxStatus:
    """Whether run_code is offered here, and why not; the probe runs on the first call."""
    key = _settings_key()
    status = _status.get(key)
    if status is not None:
        return status
    with _lock:
        status = _status.get(key)
        if status is None:
            status = _status[key] = _found()
    return status


def _found() -> SandboxStatus:
    # Imported here: the probe runs the backend, which this module picks.
    from sessions_app.runtime.sandbox.probe import probe_isolation

    backend = sandbox_backend()
    reason = backend.unavailable() or probe_isolation(backend)
    return SandboxStatus(backend=backend.name, offered=not reason, reason=reason or "")


def sandbox_offered() -> bool:
    return sandbox_status().offered
