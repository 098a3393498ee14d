"""The start probe: a run that checks the sandbox really isolates before any code is run.

Some hosts refuse unprivileged user namespaces (a sysctl, AppArmor), and a bwrap that
starts may still leave something open. The probe runs a short Python program inside the
sandbox that looks for what must not be there — the project's files, the server's
environment, a network interface other than loopback, a writable system directory, a
capability, the host's processes — and checks the workspace is writable. Any finding, or a
run that does not complete, keeps run_code off and says why (/readyz's details).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path

from django.conf import settings

from sessions_app.runtime.sandbox.base import RunLimits, RunSpec, SandboxBackend
from sessions_app.runtime.sandbox.bwrap import (
    BWRAP_ENVIRONMENT,
    SANDBOX_ENVIRONMENT,
    scratch_root,
)
from sessions_app.runtime.sandbox.workspace import scratch_prepare

logger = logging.getLogger(__name__)

PROBE_WALL_SEC = 20.0
# Names the sandbox sets itself (bash adds the last three): any other name of the server's
# environment seen inside is a leak.
SANDBOX_OWN_KEYS = {*SANDBOX_ENVIRONMENT, *BWRAP_ENVIRONMENT, "PWD", "SHLVL", "_"}
PROBE_CODE = """\
import json, os, socket
found = []
if os.path.exists({project!r}):
    found.append("the project's directory is visible")
with open("/proc/1/environ", "rb") as first:
    first_names = {{item.split(b"=")[0].decode() for item in first.read().split(b"\\0")}}
environments = [set(os.environ), first_names]
if any(key in names for names in environments for key in {server_keys!r}):
    found.append("the server's environment is visible")
names = [name for _, name in socket.if_nameindex()]
if {isolated_net!r} and names != ["lo"]:
    found.append("network interfaces are visible: " + ", ".join(names))
for directory in ("/usr", "/"):
    try:
        open(os.path.join(directory, ".sandbox-probe"), "w").close()
        found.append(directory + " is writable")
    except OSError:
        pass
with open("/proc/self/status") as status:
    caps = [line.split()[1] for line in status if line.startswith("CapEff")]
if caps and int(caps[0], 16):
    found.append("the program holds capabilities")
if len([pid for pid in os.listdir("/proc") if pid.isdigit()]) > 8:
    found.append("other processes are visible")
with open("probe.txt", "w") as out:
    out.write("ok")
print(json.dumps(found))
"""


def probe_isolation(backend: SandboxBackend) -> str | None:
    """None when the isolation holds, else what is wrong (one sentence)."""
    outcome: list = []
    thread = threading.Thread(
        target=lambda: outcome.append(_probe_in_thread(backend)), name="jarvis-sandbox-probe"
    )
    # A thread of its own with a loop of its own: the caller may be on an event loop.
    thread.start()
    thread.join()
    reason = outcome[0] if outcome else "the sandbox probe did not finish"
    if reason:
        logger.warning("run_code is not offered: %s", reason)
    return reason


def _probe_in_thread(backend: SandboxBackend) -> str | None:
    try:
        return asyncio.run(_probe(backend))
    except Exception as error:  # noqa: BLE001 - any failure means: do not run code here
        return f"the sandbox probe failed: {error}"


class _NeverStopped:
    def is_set(self) -> bool:
        return False

    async def wait_async(self, timeout: float | None) -> bool:
        await asyncio.sleep(timeout if timeout is not None else 3600 * 24)
        return False


async def _probe(backend: SandboxBackend) -> str | None:
    scratch = Path(tempfile.mkdtemp(prefix="jarvis-probe-", dir=scratch_root()))
    outcome = None
    try:
        scratch_prepare(scratch)
        code = PROBE_CODE.format(
            project=str(settings.BASE_DIR),
            isolated_net=not settings.SANDBOX_NETWORK,
            server_keys=sorted(set(os.environ) - SANDBOX_OWN_KEYS),
        )
        limits = RunLimits.from_settings(timeout_sec=PROBE_WALL_SEC)
        outcome = await backend.run(
            RunSpec(language="python", code=code, limits=limits, scratch=scratch),
            abort=_NeverStopped(),
        )
        if outcome.exit_code != 0:
            detail = (outcome.stderr.strip().splitlines() or ["no output"])[-1][:300]
            return f"the sandbox could not run its probe ({backend.name}): {detail}"
        found = json.loads(outcome.stdout.strip().splitlines()[-1])
        if found:
            return "the sandbox does not isolate: " + "; ".join(found)
        returned = outcome.workspace
        if returned is None or "probe.txt" not in returned.files:
            return "the sandbox's workspace is not writable"
        return None
    finally:
        if outcome is not None and outcome.workspace is not None:
            outcome.workspace.close()
        shutil.rmtree(scratch, ignore_errors=True)
