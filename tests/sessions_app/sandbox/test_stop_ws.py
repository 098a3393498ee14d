"""docs/design.md §28 on the WebSocket: a run does not hold up the worker, and Stop ends it —
its whole process tree at once — with the turn `aborted` and the call closed (§5)."""

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from channels.db import database_sync_to_async

from tests.helpers import eventually
from tests.sessions_app.web.consumers.conftest import (  # noqa: F401 - anyio_backend: a fixture
    anyio_backend,
    events_until,
    open_session,
    turn_done,
)

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scratch(settings):
    """A scratch root of this test's own, which the sandbox's user can reach (a pytest
    tmp_path sits in a directory only root may enter)."""
    root = Path(tempfile.mkdtemp(prefix="jarvis-sandbox-test-"))
    root.chmod(0o755)
    settings.SANDBOX_SCRATCH_DIR = str(root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def processes_under(directory: Path) -> list[int]:
    """The processes of runs whose scratch directory is under `directory`: the bwrap
    processes (their command line names it) and every descendant of theirs."""
    parents = {}
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                parents[int(pid)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if str(directory).encode() in cmdline.read():
                    found.add(int(pid))
        except OSError:
            continue  # gone meanwhile
    grown = True
    while grown:
        children = {pid for pid, parent in parents.items() if parent in found} - found
        grown = bool(children)
        found |= children
    return sorted(found)


async def test_stop_during_a_sleep_ends_the_turn_aborted_and_leaves_no_process(
    backend, sandbox, scratch, alice_token, bob_token
):
    tmp_path = scratch
    alice, _ = await open_session("/ws/sessions/sleeper/", alice_token)
    bob, _ = await open_session("/ws/sessions/other/", bob_token)
    await alice.send_json_to(
        {"type": "prompt", "text": "run python: import time\ntime.sleep(60)\nprint('woke')"}
    )
    await database_sync_to_async(eventually)(
        lambda: processes_under(tmp_path), what="the run's processes started"
    )

    # Meanwhile the worker serves another person's turn.
    await bob.send_json_to({"type": "prompt", "text": "what is 6*7"})
    served = await events_until(bob, turn_done)
    assert served[-1]["status"] == "completed"
    assert processes_under(tmp_path), "alice's run is still running"

    stopped_at = time.monotonic()
    await alice.send_json_to({"type": "abort"})
    seen = await events_until(alice, turn_done)
    assert time.monotonic() - stopped_at < 1.0
    assert seen[-1]["status"] == "aborted"
    assert processes_under(tmp_path) == [], "every process of the run is gone"
    results = [e["entry"] for e in seen if e["type"] == "entry" and e["entry"]["role"] == "tool"]
    (result,) = results
    assert result["name"] == "run_code" and result["is_error"] is True
    assert result["content"].startswith("aborted")
    assert list(tmp_path.glob("jarvis-run-*")) == [], "the run's scratch directory is gone"
    await alice.disconnect()
    await bob.disconnect()
