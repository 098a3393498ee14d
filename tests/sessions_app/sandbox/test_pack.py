"""docs/design.md §30: what comes back from a run is the program's own writing. The process
that returns it runs as the program's user, which may stop it, kill it or make it send
anything; the worker checks every path, bounds every size and keeps nothing of a list that
breaks the rules — so nothing lands outside the session's workspace, nor more than its room."""

import os
import threading

import pytest

from sessions_app.models import BlobLink
from sessions_app.runtime.sandbox import inside
from sessions_app.runtime.sandbox.base import HandedFile
from sessions_app.runtime.sandbox.pack import read_pack
from sessions_app.runtime.sandbox.workspace import collect
from sessions_app.store import get_store

pytestmark = pytest.mark.django_db(transaction=True)

HANDED = {"notes.txt": HandedFile("a" * 64, 5)}


def path(kind: bytes, name: bytes) -> bytes:
    return kind + inside.PATH.pack(len(name)) + name


def file(name: bytes, data: bytes) -> bytes:
    chunk = inside.CHUNK_LEN.pack(len(data)) + data if data else b""
    return path(b"F", name) + chunk + inside.CHUNK_LEN.pack(0)


END = b"E" + inside.END.pack(inside.EXITED, 0, 0)


def returned(pack: bytes, tmp_path, *, max_bytes: int = 1 << 20):
    """`pack` read as a run's answer, from a pipe as the sandbox writes it."""
    read, write = os.pipe()

    def send():
        try:
            os.write(write, pack)
        except BrokenPipeError:
            pass  # the worker stopped reading, as it should
        finally:
            os.close(write)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        return read_pack(read, HANDED, max_bytes=max_bytes, spool_dir=tmp_path)
    finally:
        sender.join()


def test_paths_outside_the_workspace_are_not_kept_and_the_rest_is(alice, tmp_path):
    get_store().create("forged", owner_id=alice.id)
    pack = (
        inside.MAGIC_OUT
        + file(b"../outside.txt", b"escaped")
        + file(b"attachments/planted.txt", b"planted")
        + file(b"/etc/planted", b"planted")
        + file(b"a/./b.txt", b"planted")
        + file("caf\N{LATIN SMALL LETTER E WITH ACUTE}.txt".encode(), b"the run's own")
        + path(b"U", b"notes.txt")
        + END
    )

    answer = returned(pack, tmp_path)
    kept = collect(answer, HANDED, session_id="forged", owner_id=alice.id)

    assert kept.changes == {"caf\N{LATIN SMALL LETTER E WITH ACUTE}.txt": kept.files[0]["id"]}
    for name in ("../outside.txt", "attachments/planted.txt", "/etc/planted", "a/./b.txt"):
        assert f"{name}: not a valid workspace path, not kept" in kept.notes
    assert list(BlobLink.objects.filter(session_id="forged").values_list("name", flat=True)) == [
        "caf\N{LATIN SMALL LETTER E WITH ACUTE}.txt"
    ]


@pytest.mark.parametrize(
    "pack",
    [
        pytest.param(inside.MAGIC_OUT + path(b"U", b"other.txt") + END, id="unchanged-not-handed"),
        pytest.param(
            inside.MAGIC_OUT + file(b"x.txt", b"1") + file(b"x.txt", b"2") + END, id="twice"
        ),
        pytest.param(inside.MAGIC_OUT + file(b"x.txt", b"x" * 4096) + END, id="over-its-room"),
        pytest.param(
            inside.MAGIC_OUT + path(b"F", b"x.txt") + inside.CHUNK_LEN.pack(inside.CHUNK + 1),
            id="chunk-too-large",
        ),
        pytest.param(inside.MAGIC_OUT + file(b"x.txt", b"x"), id="no-end"),
        pytest.param(b"something else", id="no-header"),
    ],
)
def test_a_list_that_breaks_the_rules_keeps_nothing(alice, tmp_path, pack):
    get_store().create("broken", owner_id=alice.id)

    answer = returned(pack, tmp_path, max_bytes=1024)
    kept = collect(answer, HANDED, session_id="broken", owner_id=alice.id)

    assert kept.changes == {} and kept.files == []
    assert kept.notes[-1].endswith("nothing of this run was kept")
    assert not BlobLink.objects.filter(session_id="broken").exists()


def test_a_file_the_sandbox_could_not_read_is_not_kept(alice, tmp_path):
    get_store().create("unread", owner_id=alice.id)
    pack = (
        inside.MAGIC_OUT
        + path(b"F", b"half.txt")
        + inside.CHUNK_LEN.pack(2)
        + b"ha"
        + inside.CHUNK_LEN.pack(inside.UNREADABLE)
        + file(b"whole.txt", b"whole")
        + END
    )

    kept = collect(returned(pack, tmp_path), HANDED, session_id="unread", owner_id=alice.id)

    assert [file["path"] for file in kept.files] == ["whole.txt"]
    assert "half.txt: could not be read, not kept" in kept.notes
    assert kept.changes["notes.txt"] is None, "a handed-in file not named again is removed"
