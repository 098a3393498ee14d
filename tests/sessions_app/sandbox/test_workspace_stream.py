"""docs/design.md §30: a run's files go into its own /workspace (a tmpfs whose size is
SANDBOX_WORKSPACE_MAX_BYTES) as one stream and come back as another. What a run writes in all
is capped there and in /tmp; what changed is stored; and what comes back is read as the
program's own writing (test_pack.py)."""

import pytest

from tests.sessions_app.sandbox.conftest import run

pytestmark = pytest.mark.django_db(transaction=True)

KiB = 1024
MiB = 1024 * KiB


def listing(api, session_id: str) -> dict[str, int]:
    files = api.get(f"/api/sessions/{session_id}/workspace/").json()["files"]
    return {file["path"]: file["size"] for file in files}


def content(api, session_id: str, path: str) -> bytes:
    response = api.get(f"/api/sessions/{session_id}/workspace/{path}")
    assert response.status_code == 200, path
    return b"".join(response.streaming_content)


def test_the_files_a_run_writes_changes_and_removes_are_stored(backend, sandbox, api):
    api.post("/api/sessions/", {"id": "work"}, format="json")
    run(
        api,
        "work",
        "import os\nos.makedirs('rows/deep', exist_ok=True)\n"
        "for i in range(300):\n"
        "    open(f'rows/{i:03d}.txt', 'w').write(f'row {i}\\n')\n"
        "open('rows/deep/keep.txt', 'w').write('untouched')\n"
        "open('notes.txt', 'w').write('first')\n",
    )

    # Changed, removed, left alone and new, in one run; one file big enough to leave memory.
    second = run(
        api,
        "work",
        "import os\nopen('notes.txt', 'w').write('second')\nos.remove('rows/007.txt')\n"
        f"open('big.bin', 'wb').write(bytes(range(256)) * {3 * MiB // 256})\n"
        "print(open('rows/deep/keep.txt').read(), len(os.listdir('rows')))",
    )

    assert second["stdout"] == "untouched 300\n"  # 299 rows and deep/
    assert [file["path"] for file in second["files"]] == ["big.bin", "notes.txt"]
    workspace = second["entry"]["data"]["workspace"]
    assert workspace.keys() == {"big.bin", "notes.txt", "rows/007.txt"}
    assert workspace["rows/007.txt"] is None
    files = listing(api, "work")
    assert len(files) == 302 and "rows/007.txt" not in files
    assert content(api, "work", "notes.txt") == b"second"
    assert content(api, "work", "rows/deep/keep.txt") == b"untouched"
    assert content(api, "work", "big.bin") == bytes(range(256)) * (3 * MiB // 256)
    third = run(api, "work", "print(open('notes.txt').read(), len(open('big.bin', 'rb').read()))")
    assert third["stdout"] == f"second {3 * MiB}\n"
    assert third["files"] == []


def test_files_in_a_directory_the_program_closed_to_itself_are_still_kept(sandbox, api):
    api.post("/api/sessions/", {"id": "closed"}, format="json")
    run(api, "closed", "import os\nos.makedirs('a/b')\nopen('a/b/kept.txt', 'w').write('kept')")

    closed = run(
        api,
        "closed",
        "import os\nopen('a/b/new.txt', 'w').write('new')\n"
        "os.chmod('a/b', 0o600)\nos.chmod('a', 0o100)",
    )

    assert [file["path"] for file in closed["files"]] == ["a/b/new.txt"]
    assert listing(api, "closed") == {"a/b/kept.txt": 4, "a/b/new.txt": 3}


def test_a_run_that_writes_more_than_the_workspace_limit_meets_it_and_changes_nothing(
    sandbox, settings, api
):
    settings.SANDBOX_WORKSPACE_MAX_BYTES = MiB
    api.post("/api/sessions/", {"id": "flood"}, format="json")
    run(api, "flood", "open('kept.txt', 'w').write('as it was')")

    # Each file is under the limit; together they are not. The program even goes on after
    # the first failure.
    result = run(
        api,
        "flood",
        "open('kept.txt', 'w').write('changed')\n"
        "written, failures = 0, set()\n"
        "for i in range(40):\n"
        "    try:\n"
        "        with open(f'part{i}.bin', 'wb') as part:\n"
        f"            part.write(b'x' * {100 * KiB})\n"
        f"        written += {100 * KiB}\n"
        "    except OSError as error:\n"
        "        failures.add(error.strerror)\n"
        "print(written, sorted(failures))",
    )

    written, _, failures = result["stdout"].partition(" ")
    assert int(written) <= MiB + 64 * KiB, "no more than the limit (and its page spare) fits"
    assert failures.strip() == "['No space left on device']"
    assert result["files"] == []
    assert (
        "[workspace] the run filled its workspace (SANDBOX_WORKSPACE_MAX_BYTES, 1048576 bytes) "
        "and writes past it failed: nothing of this run was kept" in result["stderr"]
    )
    assert "workspace" not in result["entry"]["data"]
    assert listing(api, "flood") == {"kept.txt": len("as it was")}
    assert content(api, "flood", "kept.txt") == b"as it was"


def test_tmp_holds_no_more_than_its_limit(sandbox, settings, api):
    settings.SANDBOX_TMP_MAX_BYTES = MiB
    api.post("/api/sessions/", {"id": "tmp"}, format="json")

    result = run(
        api,
        "tmp",
        "try:\n"
        f"    open('/tmp/big.bin', 'wb').write(b'x' * {2 * MiB})\n"
        "except OSError as error:\n"
        "    print(error.strerror)\n"
        "open('result.txt', 'w').write('done')",
    )

    assert result["stdout"] == "No space left on device\n"
    assert (
        "[workspace] /tmp filled its SANDBOX_TMP_MAX_BYTES (1048576 bytes): writes past it failed"
        in result["stderr"]
    )
    assert [file["path"] for file in result["files"]] == ["result.txt"], "/tmp is not kept"


def test_a_run_ended_by_the_wall_clock_returns_what_it_wrote(sandbox, settings, api):
    settings.SANDBOX_WALL_SEC = 1
    api.post("/api/sessions/", {"id": "slow"}, format="json")

    result = run(
        api,
        "slow",
        "(while true; do echo tick >> ticks.txt; sleep 0.05; done) &\n"
        "echo written > before.txt\nsleep 30",
        "bash",
    )

    assert result["killed"] == "timeout" and result["exit_code"] is None
    assert sorted(file["path"] for file in result["files"]) == ["before.txt", "ticks.txt"]
    # The loop in the background was ended before the files were listed: whole lines.
    ticks = content(api, "slow", "ticks.txt")
    assert ticks and ticks == b"tick\n" * ticks.count(b"\n")


def test_a_program_that_kills_the_process_returning_its_files_keeps_nothing(sandbox, api):
    api.post("/api/sessions/", {"id": "rude"}, format="json")
    run(api, "rude", "open('kept.txt', 'w').write('as it was')")

    result = run(
        api,
        "rude",
        "import os\nopen('kept.txt', 'w').write('changed')\nopen('new.txt', 'w').write('x')\n"
        "os.kill(os.getppid(), 9)",
    )

    assert result["files"] == []
    assert (
        "[workspace] the sandbox's own process that returns the files ended before it was "
        "done (the program killed it, or a limit did): nothing of this run was kept"
        in result["stderr"]
    )
    assert listing(api, "rude") == {"kept.txt": len("as it was")}


def test_a_run_that_leaves_more_than_10000_files_keeps_none_of_them(sandbox, api):
    api.post("/api/sessions/", {"id": "many"}, format="json")
    run(api, "many", "open('kept.txt', 'w').write('as it was')")

    result = run(
        api,
        "many",
        "import os\nos.mkdir('many')\nfor i in range(10_001):\n"
        "    open(f'many/{i}', 'w').close()\nos.remove('kept.txt')",
    )

    assert result["exit_code"] == 0 and result["files"] == []
    assert (
        "[workspace] more than 10000 files (or 40000 names in all): nothing of this run was kept"
        in result["stderr"]
    )
    assert listing(api, "many") == {"kept.txt": len("as it was")}
