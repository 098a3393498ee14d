"""A Stop frame is read as the server hands it to the socket's queue: the turn is stopped
before the consumer's receive loop gets to the frame, and the frame still reaches it."""

import asyncio

import pytest

from sessions_app.web.consumers import SessionConsumer
from sessions_app.web.stop_lane import STOP_FRAME_MAX_CHARS, is_stop, stop_lane_install
from tests.fakes.llm_server import FakeLLMServer, Hold, Reply
from tests.helpers import GUARD_SEC

from .conftest import events_until, open_session, turn_done


def text_frame(text: str) -> dict:
    return {"type": "websocket.receive", "text": text}


def test_a_stop_is_seen_when_queued_and_still_delivered():
    async def scenario():
        queue: asyncio.Queue = asyncio.Queue()
        stops = []
        assert stop_lane_install(queue.get, lambda: stops.append(len(stops)))
        queue.put_nowait(text_frame('{"type": "prompt", "text": "abort the mission"}'))
        assert stops == []
        queue.put_nowait(text_frame('{"type": "abort"}'))
        # Synchronously, in the server's own call: no pass of the loop in between.
        assert stops == [0]
        received = [await queue.get(), await queue.get()]
        assert [m["text"] for m in received] == [
            '{"type": "prompt", "text": "abort the mission"}',
            '{"type": "abort"}',
        ]

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "message",
    [
        text_frame('{"type": "ping", "note": "abort"}'),
        text_frame('{"type": "abort"'),  # not JSON: the consumer answers with its error
        text_frame('["abort"]'),
        text_frame('{"type": "abort", "pad": "' + "x" * STOP_FRAME_MAX_CHARS + '"}'),
        {"type": "websocket.receive", "bytes": b'{"type": "abort"}'},
        {"type": "websocket.disconnect", "code": 1000},
    ],
)
def test_other_messages_are_only_queued(message):
    assert not is_stop(message)


def test_a_failing_stop_still_queues_the_frame():
    async def scenario():
        queue: asyncio.Queue = asyncio.Queue()

        def broken():
            raise RuntimeError("boom")

        stop_lane_install(queue.get, broken)
        queue.put_nowait(text_frame('{"type":"abort"}'))
        return (await queue.get())["text"]

    assert asyncio.run(scenario()) == '{"type":"abort"}'


def test_a_receive_that_is_not_a_queue_is_left_as_it_is():
    async def receive():
        return {}

    assert stop_lane_install(receive, lambda: None) is False


@pytest.fixture
def model(settings):
    with FakeLLMServer() as server:
        settings.JARVIS_MODEL = "openai:gpt-4o-mini"
        settings.OPENAI_API_KEY = "test"
        settings.OPENAI_BASE_URL = server.openai_url
        yield server


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_stop_ends_the_turn_while_the_socket_is_busy_with_an_earlier_frame(
    backend, alice_token, model, monkeypatch
):
    # The receive loop handles one frame at a time; under load it is behind. Here it is held
    # on a queue_cancel frame, and the model on its next piece: the Stop behind them in the
    # socket's queue still ends the turn, and the page gets `agent_end` "aborted".
    busy = asyncio.Event()
    let_go = asyncio.Event()

    async def slow_queue_cancel(self, frame):
        busy.set()
        await let_go.wait()

    monkeypatch.setattr(SessionConsumer, "_queue_cancel", slow_queue_cancel)
    hold = Hold(words=3)
    model.script(Reply(text="one two three four five", hold=hold))
    tab, _ = await open_session("/ws/sessions/stop-lane/", alice_token)
    await tab.send_json_to({"type": "prompt", "text": "count"})
    await events_until(tab, lambda event: event["type"] == "delta")
    assert await asyncio.to_thread(hold.reached.wait, GUARD_SEC)
    await tab.send_json_to({"type": "queue_cancel", "queue_id": "q_none"})
    await asyncio.wait_for(busy.wait(), GUARD_SEC)
    await tab.send_json_to({"type": "abort"})
    try:
        ended = await events_until(tab, turn_done)
        assert ended[-1]["type"] == "agent_end"
        assert ended[-1]["status"] == "aborted"
        assert not let_go.is_set()  # the receive loop was still on the earlier frame
    finally:
        let_go.set()
        hold.release()
    await tab.disconnect()
