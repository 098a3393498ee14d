"""docs/design.md §28: `run_code` runs Python and bash on the session's workspace, through
the API's turns (the offline model's `run python:` / `run bash:`), on both store backends."""

import pytest

from tests.sessions_app.files.helpers import upload
from tests.sessions_app.sandbox.conftest import run

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_python_prints_the_sum(backend, sandbox, api):
    api.post("/api/sessions/", {"id": "sum"}, format="json")

    result = run(api, "sum", "print(sum(range(101)))")

    assert result["exit_code"] == 0
    assert result["stdout"] == "5050\n"
    assert result["stderr"] == ""
    assert result["killed"] is None and result["truncated"] is False
    assert result["files"] == []
    assert result["duration_ms"] >= 0
    entries = api.get("/api/sessions/sum/entries/").json()["entries"]
    assert "5050" in entries[-2]["content"], "the answer says what the program printed"


def test_a_file_written_in_one_turn_is_read_in_the_next(backend, sandbox, api):
    api.post("/api/sessions/", {"id": "files"}, format="json")

    written = run(api, "files", "mkdir -p data && echo 'hello, workspace' > data/note.txt", "bash")
    read = run(api, "files", "print(open('data/note.txt').read().strip())")

    (file,) = written["files"]
    assert file["path"] == "data/note.txt" and file["mime"] == "text/plain"
    assert file["size"] == len("hello, workspace\n")
    assert read["stdout"] == "hello, workspace\n"
    assert read["files"] == [], "reading changes nothing"
    listing = api.get("/api/sessions/files/workspace/").json()
    assert listing == {"as_of_seq": written["entry"]["seq"], "files": [file]}
    download = api.get("/api/sessions/files/workspace/data/note.txt")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == b"hello, workspace\n"
    assert download["X-Content-Type-Options"] == "nosniff"
    removed = run(api, "files", "import os; os.remove('data/note.txt')")
    assert removed["files"] == []
    assert api.get("/api/sessions/files/workspace/").json() == {
        "as_of_seq": removed["entry"]["seq"],
        "files": [],
    }


def test_the_sessions_attachments_are_read_only_under_attachments(backend, sandbox, api):
    api.post("/api/sessions/", {"id": "csv"}, format="json")
    file_id = upload(api, "csv", "spend.csv", b"month,amount\njan,10\nfeb,32\n", "text/csv")
    file_id = file_id.json()["id"]
    api.post(
        "/api/sessions/csv/messages/", {"text": "here", "attachments": [file_id]}, format="json"
    )

    result = run(
        api,
        "csv",
        "import pandas as pd\n"
        "print(pd.read_csv('attachments/spend.csv')['amount'].sum())\n"
        "for name in ('attachments/spend.csv', 'attachments/new.txt'):\n"
        "    try:\n"
        "        open(name, 'a').write('x')\n"
        "    except OSError as error:\n"
        "        print(type(error).__name__)\n",
    )

    assert result["stdout"] == "42\nPermissionError\nOSError\n"
    assert result["files"] == []


def test_the_workspace_and_its_files_are_the_owners_alone(backend, sandbox, api, bob_api):
    api.post("/api/sessions/", {"id": "mine"}, format="json")
    result = run(api, "mine", "open('secret.txt', 'w').write('only mine')")
    file_id = result["files"][0]["id"]

    assert bob_api.get("/api/sessions/mine/workspace/").status_code == 404
    assert bob_api.get("/api/sessions/mine/workspace/secret.txt").status_code == 404
    assert bob_api.get(f"/api/sessions/mine/files/{file_id}/").status_code == 404
    assert api.get("/api/sessions/mine/workspace/other.txt").status_code == 404
    assert api.get("/api/sessions/nothing/workspace/").status_code == 404
    # Through the file API too, by its id (the page downloads a result's files so).
    assert api.get(f"/api/sessions/mine/files/{file_id}/").status_code == 200


def test_a_file_rewritten_to_the_same_size_with_its_mtime_restored_is_kept(backend, sandbox, api):
    # A run is free to set a file's mtime back; its ctime it cannot, so the change shows.
    api.post("/api/sessions/", {"id": "sly"}, format="json")
    written = run(api, "sly", "open('same.txt', 'w').write('aaaa')")

    rewritten = run(
        api,
        "sly",
        "import os; s = os.stat('same.txt'); open('same.txt', 'w').write('bbbb'); "
        "os.utime('same.txt', ns=(s.st_atime_ns, s.st_mtime_ns)); "
        "assert os.stat('same.txt').st_mtime_ns == s.st_mtime_ns",
    )
    read = run(api, "sly", "print(open('same.txt').read())")

    assert rewritten["exit_code"] == 0, rewritten["stderr"]
    (before,) = written["files"]
    (after,) = rewritten["files"]
    assert after["path"] == "same.txt" and after["size"] == before["size"] == 4
    assert after["id"] != before["id"]
    assert read["stdout"] == "bbbb\n"
