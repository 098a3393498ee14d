"""docs/design.md §8: what any server -> client frame becomes when it would not fit."""

import json

import pytest

from sessions_app.core.frames import encode, frame_text

MEGABYTE = 1024 * 1024


def _sent(frame) -> tuple[dict, int]:
    text = frame_text(frame)
    return json.loads(text), len(text.encode("utf-8"))


def test_a_small_frame_is_sent_as_it_is_in_utf8():
    frame, _ = _sent({"type": "delta", "turn_id": "t1", "text": "grüße 😀"})
    assert frame == {"type": "delta", "turn_id": "t1", "text": "grüße 😀"}
    assert "😀" in frame_text({"type": "delta", "text": "😀"})


def test_a_lone_surrogate_is_escaped_rather_than_breaking_the_socket():
    text = frame_text({"type": "delta", "text": "half \ud800 a pair"})
    text.encode("utf-8")
    assert json.loads(text)["text"] == "half \ud800 a pair"


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "delta", "text": "grüße 😀", "event_seq": 3},
        {"type": "delta", "text": "half \ud800 a pair"},  # no UTF-8 form: escaped
        {"type": "usage", "counts": {1: 2}},  # a key that is not a string
        {"type": "usage", "tokens": 2**70},  # more than 64 bits
    ],
)
def test_the_text_of_any_frame_reads_back_as_the_frame_and_its_size_is_its_utf8(frame):
    text, size = encode(frame)
    assert json.loads(text) == json.loads(json.dumps(frame))
    assert size == len(text.encode("utf-8"))


def test_a_huge_command_result_keeps_its_command_and_the_start_of_its_text():
    frame, size = _sent(
        {
            "type": "command_result",
            "command": "sessions",
            "text": "s" * MEGABYTE,
            "data": {"sessions": ["x" * MEGABYTE]},
        }
    )
    assert size < 10_000
    assert frame["command"] == "sessions" and frame["truncated"] is True
    assert frame["text"] == "s" * 500 and frame["data"] == {}


def test_a_huge_approval_request_keeps_the_call_and_a_preview_of_its_arguments():
    arguments = json.dumps({"key": "k" * MEGABYTE})
    frame, size = _sent(
        {
            "type": "approval_request",
            "turn_id": "t1",
            "call_id": "c1",
            "tool": "forget",
            "arguments": arguments,
        }
    )
    assert size < 10_000
    assert frame["call_id"] == "c1" and frame["tool"] == "forget" and frame["truncated"] is True
    assert frame["arguments"] == arguments[:500]


@pytest.mark.parametrize("kind", ["delta", "proactive", "something_new"])
def test_any_other_frame_too_large_becomes_an_error_the_page_shows(kind):
    frame, size = _sent({"type": kind, "text": "d" * (2 * MEGABYTE)})
    assert size < 1000
    assert frame["type"] == "error" and frame["code"] == "too_large" and kind in frame["message"]


def test_an_entry_over_the_budget_is_a_stub_with_its_size():
    entry = {
        "seq": 7,
        "kind": "message",
        "role": "tool",
        "name": "read",
        "content": "é" * 600_000,
        "created_at": "2025-01-01T00:00:00+00:00",
    }
    frame, size = _sent({"type": "entry", "entry": entry})
    assert size < 10_000
    stub = frame["entry"]
    assert stub["seq"] == 7 and stub["name"] == "read" and stub["truncated"] is True
    assert stub["size"] > 1_200_000 and stub["preview"] == "é" * 500
