"""docs/design.md §28: code that tries to get out of the sandbox, or to exhaust the machine,
ends its run with a clear result — and the worker goes on serving another person's turn."""

import socket
import uuid

import pytest
from django.conf import settings as django_settings

from tests.sessions_app.sandbox.conftest import run

pytestmark = pytest.mark.django_db(transaction=True)

MiB = 1024 * 1024


@pytest.fixture
def limits(settings, tmp_path):
    settings.SANDBOX_CPU_SEC = 2
    settings.SANDBOX_WORKSPACE_MAX_BYTES = MiB


@pytest.fixture
def attempt(sandbox, limits, api, bob_api):
    """Run alice's attempt; afterwards Bob's ordinary turn is served as usual."""
    api.post("/api/sessions/", {"id": "attempt"}, format="json")
    bob_api.post("/api/sessions/", {"id": "bobs"}, format="json")

    def attempt_run(code: str, language: str = "python") -> dict:
        result = run(api, "attempt", code, language)
        answer = bob_api.post(
            "/api/sessions/bobs/messages/", {"text": "what is 6*7"}, format="json"
        )
        assert answer.json()["status"] == "completed"
        assert "42" in answer.json()["entries"][-2]["content"]
        return result

    return attempt_run


def test_the_projects_files_are_not_there(attempt):
    manage = str(django_settings.BASE_DIR / "manage.py")
    result = attempt(f"print(open({manage!r}).read())")
    assert result["exit_code"] == 1
    assert "FileNotFoundError" in result["stderr"]


def test_the_servers_environment_is_not_there(attempt, monkeypatch):
    # As a deployment passes it: in the server's environment.
    monkeypatch.setenv("SECRET_KEY", django_settings.SECRET_KEY)
    result = attempt("import os\nprint(sorted(os.environ))\nprint(open('/proc/1/environ').read())")
    assert result["exit_code"] == 0
    assert "SECRET_KEY" not in result["stdout"]
    assert django_settings.SECRET_KEY not in result["stdout"]
    assert "DATABASE_URL" not in result["stdout"]


def test_another_sessions_workspace_is_not_there(attempt, bob_api):
    marker = f"bob-secret-{uuid.uuid4().hex}"
    run(bob_api, "bobs", f"open('secret.txt', 'w').write({marker!r})")
    result = attempt(
        f"grep -rls {marker} / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev; "
        "echo searched",
        "bash",
    )
    assert result["stdout"] == "searched\n", "bob's file is nowhere in alice's sandbox"


def test_a_socket_to_the_host_reaches_nothing(attempt):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        result = attempt(
            "import socket\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "    print('connected')\n"
            "except OSError as error:\n"
            "    print('refused:', type(error).__name__)"
        )
        assert result["stdout"].startswith("refused:")
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


def test_a_fork_bomb_meets_the_process_limit(attempt):
    result = attempt("import os\nwhile True:\n    os.fork()")
    assert "BlockingIOError" in result["stderr"] or result["killed"] == "timeout"
    assert result["exit_code"] != 0


def test_allocating_4_gib_is_killed_for_memory(attempt):
    result = attempt("block = bytearray(4 * 1024 ** 3)\nprint('allocated')")
    assert result["killed"] == "memory"
    assert result["exit_code"] == 1
    assert "allocated" not in result["stdout"]


def test_an_endless_loop_is_killed_on_time(attempt):
    result = attempt("while True:\n    pass")
    assert result["killed"] == "timeout"
    assert result["exit_code"] is None


def test_100_mb_on_stdout_is_cut_and_the_run_killed(attempt, settings):
    result = attempt(
        "import sys\nfor _ in range(1600):\n    sys.stdout.write('x' * 65536)\nprint('end')"
    )
    assert result["killed"] == "output"
    assert result["truncated"] is True
    assert len(result["stdout"]) == settings.SANDBOX_OUTPUT_BYTES
    assert "end" not in result["stdout"]


def test_a_symlink_pointing_outside_is_never_followed_nor_kept(attempt, api):
    result = attempt(
        "import os\nos.symlink('/etc/passwd', 'passwd')\nos.symlink('../../..', 'up')\n"
        "open('real.txt', 'w').write('kept')"
    )
    assert [file["path"] for file in result["files"]] == ["real.txt"]
    assert "[workspace] passwd: a symbolic link, not kept" in result["stderr"]
    assert "[workspace] up: a symbolic link, not kept" in result["stderr"]
    listing = api.get("/api/sessions/attempt/workspace/").json()
    assert [file["path"] for file in listing["files"]] == ["real.txt"]
    again = run(api, "attempt", "import os\nprint(sorted(os.listdir('.')))")
    assert again["stdout"] == "['attachments', 'real.txt']\n"


def test_a_file_bigger_than_the_workspace_limit_is_refused(attempt, api):
    result = attempt(f"open('big.bin', 'wb').write(b'x' * {2 * MiB})")
    assert result["exit_code"] == 1
    assert "File too large" in result["stderr"]
    assert result["files"] == []
    # Together over the limit, yet within the page a tmpfs rounds each file up to.
    several = attempt(
        f"open('a.bin', 'wb').write(b'x' * {600 * 1024})\n"
        f"open('b.bin', 'wb').write(b'x' * {450 * 1024})"
    )
    assert several["exit_code"] == 0
    assert several["files"] == []
    assert "more than SANDBOX_WORKSPACE_MAX_BYTES" in several["stderr"]
    assert api.get("/api/sessions/attempt/workspace/").json()["files"] == []
