"""The agent's per-session scratchpad: `remember` and `recall` (docs/design.md §9)."""

import json

import pytest

from memory_app.services import working_memory_recall, working_memory_remember
from tests.helpers import run_python


@pytest.mark.django_db
def test_remembered_values_are_recalled_in_a_later_turn_of_the_same_session():
    working_memory_remember(session_id="s-wm", key="locker", value="4711")
    working_memory_remember(session_id="s-wm", key="parking", value="level 2")
    working_memory_remember(session_id="s-other", key="locker", value="1234")

    assert working_memory_recall(session_id="s-wm", key="locker") == {"locker": "4711"}
    assert working_memory_recall(session_id="s-wm") == {"locker": "4711", "parking": "level 2"}
    assert working_memory_recall(session_id="s-other") == {"locker": "1234"}
    assert working_memory_recall(session_id="s-wm", key="missing") == {}
    assert working_memory_recall(session_id="s-new") == {}


@pytest.mark.django_db
def test_remembering_a_key_again_replaces_its_value():
    working_memory_remember(session_id="s-wm", key=" locker ", value="4711")
    working_memory_remember(session_id="s-wm", key="locker", value="0815")
    assert working_memory_recall(session_id="s-wm") == {"locker": "0815"}


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "   ", "k" * 201])
def test_a_key_must_be_a_short_non_empty_name(key):
    with pytest.raises(ValueError, match="key"):
        working_memory_remember(session_id="s-wm", key=key, value="x")


@pytest.mark.django_db(transaction=True)
def test_working_memory_survives_a_restart():
    written = run_python(
        "from memory_app.services import working_memory_remember\n"
        "working_memory_remember(session_id='s-restart', key='door', value='blue')\n"
    )
    assert written.returncode == 0, written.stderr
    # This process never saw the write: the value came back from the database.
    assert working_memory_recall(session_id="s-restart") == {"door": "blue"}

    working_memory_remember(session_id="s-restart", key="window", value="open")
    read = run_python(
        "import json\n"
        "from memory_app.services import working_memory_recall\n"
        "print(json.dumps(working_memory_recall(session_id='s-restart')))\n"
    )
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout.strip().splitlines()[-1]) == {"door": "blue", "window": "open"}
