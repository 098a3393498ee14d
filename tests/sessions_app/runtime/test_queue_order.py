"""The order waiting prompts run in (docs/design.md §18): added last, an interrupt's first,
and the steers a closing turn did not take before everything else."""

import pytest

from sessions_app.runtime.turn import queue
from sessions_app.runtime.turn.queue import QueueFull

pytestmark = pytest.mark.django_db


def add(text, kind="queue", first=False, incarnation="i1"):
    return queue.queue_add(
        session_id="s1", incarnation=incarnation, owner_id=None, text=text, kind=kind, first=first
    )


def listed(incarnation="i1"):
    return [
        (w.text, w.position) for w in queue.queue_list(session_id="s1", incarnation=incarnation)
    ]


def test_added_last_interrupt_first_and_untaken_steers_before_both():
    add("one")
    add("steer me", kind="steer")
    add("two")
    add("now", first=True)
    assert listed() == [("now", 0), ("one", 1), ("steer me", 2), ("two", 3)]
    queue.steers_to_front(session_id="s1", incarnation="i1")
    assert listed() == [("steer me", 0), ("now", 1), ("one", 2), ("two", 3)]


def test_a_full_queue_refuses_and_an_earlier_incarnation_is_neither_listed_nor_counted(settings):
    settings.MAX_QUEUED_PER_SESSION = 2
    add("old", incarnation="i0")
    add("one")
    add("two")
    with pytest.raises(QueueFull):
        add("three")
    assert listed() == [("one", 0), ("two", 1)]
    assert listed("i0") == []


def test_a_full_queue_still_takes_one_interrupt_before_every_other(settings):
    settings.MAX_QUEUED_PER_SESSION = 2
    add("one")
    add("two")
    assert add("stop, do this", first=True).position == 0
    # One place of its own, not an unbounded one: the next interrupt, or prompt, is refused.
    for first in (True, False):
        with pytest.raises(QueueFull):
            add("again", first=first)
    assert listed() == [("stop, do this", 0), ("one", 1), ("two", 2)]
