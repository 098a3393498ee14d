"""Control before data: a Stop frame is read as the server hands it to the socket's queue
(the turn is stopped before the consumer's receive loop gets to the frame; a turn on
another worker is sent its Stop from there), and a prompt that nothing of the socket waits
before starts its turn there — one that arrives behind other frames keeps its place."""

import asyncio

import pytest

from sessions_app.runtime.live import live
from sessions_app.web.consumers import SessionConsumer
from sessions_app.web.frame_lane import STOP_FRAME_MAX_CHARS, frame_lane_install, stop_frame
from tests.fakes.llm_server import Hold, Reply
from tests.helpers import GUARD_SEC

from .conftest import events_until, open_session, turn_done


def text_frame(text: str) -> dict:
    return {"type": "websocket.receive", "text": text}


ABORT = '{"type": "abort"}'
PROMPT = '{"type": "prompt", "text": "abort the mission"}'


class Recorder:
    def __init__(self, take: bool = True, take_stop: bool = False):
        self.stops = 0
        self.alone: list[bool] = []
        self.taken: list[str] = []
        self.take = take
        self.take_stop = take_stop

    def on_stop(self, plain: bool, alone: bool) -> bool:
        self.stops += 1
        self.alone.append(plain and alone)
        return self.take_stop

    def take_now(self, text: str) -> bool:
        if self.take:
            self.taken.append(text)
        return self.take


def drained(queue: asyncio.Queue) -> list[str]:
    return [queue.get_nowait()["text"] for _ in range(queue.qsize())]


def test_a_stop_is_seen_when_queued_and_still_delivered():
    async def scenario():
        queue: asyncio.Queue = asyncio.Queue()
        seen = Recorder(take=False)
        lane = frame_lane_install(queue.get, seen.on_stop, seen.take_now)
        queue.put_nowait(text_frame(PROMPT))
        queue.put_nowait(text_frame(ABORT))
        # Synchronously, in the server's own call: no pass of the loop in between.
        assert seen.stops == 1
        assert seen.alone == [False]  # the prompt waits before it
        assert lane.pending == 2
        assert drained(queue) == [PROMPT, ABORT]

    asyncio.run(scenario())


def test_a_frame_is_taken_at_once_only_when_nothing_waits_before_it():
    async def scenario():
        queue: asyncio.Queue = asyncio.Queue()
        seen = Recorder()
        lane = frame_lane_install(queue.get, seen.on_stop, seen.take_now)
        queue.put_nowait(text_frame(PROMPT))  # nothing before it: taken, not queued
        assert seen.taken == [PROMPT] and queue.empty() and lane.pending == 0
        queue.put_nowait(text_frame(ABORT))  # a Stop is always queued too
        queue.put_nowait(text_frame('{"type": "prompt", "text": "second"}'))
        assert seen.taken == [PROMPT]  # behind the Stop: it keeps its place
        assert drained(queue) == [ABORT, '{"type": "prompt", "text": "second"}']
        assert lane.pending == 2
        lane.handled()  # the Stop; the receive loop still handles the second prompt
        queue.put_nowait(text_frame('{"type": "prompt", "text": "third"}'))
        assert seen.taken == [PROMPT]
        assert drained(queue) == ['{"type": "prompt", "text": "third"}']
        lane.handled()
        lane.handled()
        assert lane.pending == 0
        queue.put_nowait(text_frame('{"type": "prompt", "text": "fourth"}'))
        assert seen.taken == [PROMPT, '{"type": "prompt", "text": "fourth"}']

    asyncio.run(scenario())


def test_a_stop_taken_where_it_arrives_is_queued_only_behind_other_frames():
    async def scenario():
        queue: asyncio.Queue = asyncio.Queue()
        seen = Recorder(take=False, take_stop=True)
        lane = frame_lane_install(queue.get, seen.on_stop, seen.take_now)
        queue.put_nowait(text_frame(ABORT))  # alone, and taken: the receive loop never sees it
        assert seen.alone == [True] and queue.empty() and lane.pending == 0
        # More than a Stop in it: the receive loop checks it (and answers what is wrong).
        padded = '{"type": "abort", "note": "now"}'
        queue.put_nowait(text_frame(padded))
        assert seen.alone == [True, False]
        queue.put_nowait(text_frame(PROMPT))
        queue.put_nowait(text_frame(ABORT))  # behind the others: it keeps its place too
        assert seen.alone == [True, False, False]
        assert drained(queue) == [padded, PROMPT, ABORT]
        assert lane.pending == 3

    asyncio.run(scenario())


def test_frames_queued_before_the_lane_count_as_waiting():
    async def scenario():
        queue: asyncio.Queue = asyncio.Queue()
        queue.put_nowait(text_frame('{"type": "prompt", "text": "sent while opening"}'))
        seen = Recorder()
        frame_lane_install(queue.get, seen.on_stop, seen.take_now)
        queue.put_nowait(text_frame(PROMPT))
        assert seen.taken == []
        assert len(drained(queue)) == 2

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
def test_other_messages_are_not_a_stop(message):
    assert stop_frame(message) is None


def test_a_failing_hook_still_queues_the_frame():
    async def scenario():
        queue: asyncio.Queue = asyncio.Queue()

        def broken(*_):
            raise RuntimeError("boom")

        frame_lane_install(queue.get, broken, broken)
        queue.put_nowait(text_frame(ABORT))
        queue.put_nowait(text_frame(PROMPT))
        return drained(queue)

    assert asyncio.run(scenario()) == [ABORT, PROMPT]


def test_a_receive_that_is_not_a_queue_is_left_as_it_is():
    async def receive():
        return {}

    assert frame_lane_install(receive, lambda *_: False, lambda _text: True) is None


class ReceiveLoopHeld:
    """Holds the socket's receive loop on a `queue_cancel` frame until `let_go` is set; the
    frame is noted in `happened` once it is handled."""

    def __init__(self, monkeypatch, happened: list[str] | None = None):
        self.busy = asyncio.Event()
        self.let_go = asyncio.Event()
        self.happened = happened if happened is not None else []

        async def slow_queue_cancel(consumer, frame):
            self.busy.set()
            await self.let_go.wait()
            self.happened.append("queue_cancel")

        monkeypatch.setattr(SessionConsumer, "_queue_cancel", slow_queue_cancel)

    async def hold(self, tab) -> None:
        await tab.send_json_to({"type": "queue_cancel", "queue_id": "q_none"})
        await asyncio.wait_for(self.busy.wait(), GUARD_SEC)


def turns_noted(monkeypatch, happened: list[str]) -> None:
    """Each turn a socket starts is noted in `happened` as it begins."""
    turn = SessionConsumer._turn

    async def noted_turn(consumer, text, attachments=None):
        happened.append("turn")
        await turn(consumer, text, attachments)

    monkeypatch.setattr(SessionConsumer, "_turn", noted_turn)


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_stop_ends_the_turn_while_the_socket_is_busy_with_an_earlier_frame(
    backend, alice_token, model, monkeypatch
):
    # The receive loop handles one frame at a time; under load it is behind. Here it is held
    # on a queue_cancel frame, and the model on its next piece: the Stop behind them in the
    # socket's queue still ends the turn, and the page gets `agent_end` "aborted".
    receive_loop = ReceiveLoopHeld(monkeypatch)
    hold = Hold(words=3)
    model.script(Reply(text="one two three four five", hold=hold))
    tab, _ = await open_session("/ws/sessions/stop-lane/", alice_token)
    await tab.send_json_to({"type": "prompt", "text": "count"})
    await events_until(tab, lambda event: event["type"] == "delta")
    assert await asyncio.to_thread(hold.reached.wait, GUARD_SEC)
    await receive_loop.hold(tab)
    await tab.send_json_to({"type": "abort"})
    try:
        ended = await events_until(tab, turn_done)
        assert ended[-1]["type"] == "agent_end"
        assert ended[-1]["status"] == "aborted"
        assert not receive_loop.happened  # the receive loop was still on the earlier frame
    finally:
        receive_loop.let_go.set()
        hold.release()
    await tab.disconnect()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_prompt_behind_a_busy_frame_waits_for_it(backend, alice_token, monkeypatch):
    # The receive loop is held on an earlier frame: a prompt sent now keeps its place and
    # starts only once that frame is handled.
    handled: list[str] = []
    receive_loop = ReceiveLoopHeld(monkeypatch, handled)
    turns_noted(monkeypatch, handled)
    tab, _ = await open_session("/ws/sessions/lane-order/", alice_token)
    await receive_loop.hold(tab)
    await tab.send_json_to({"type": "prompt", "text": "hello"})
    # The prompt is in the socket's queue now (the test communicator puts it there at once).
    receive_loop.let_go.set()
    events = await events_until(tab, turn_done)
    assert handled == ["queue_cancel", "turn"]
    assert events[0]["type"] == "agent_start"
    assert events[-1]["status"] == "completed"
    await tab.disconnect()


class StopsElsewhere:
    """Stands in for the live bus' Stop to the worker that runs a turn: counts each one."""

    def __init__(self):
        self.sent = 0
        self.arrived = asyncio.Event()

    async def __call__(self, *, session_id):
        self.sent += 1
        self.arrived.set()
        return True


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_stop_for_a_turn_elsewhere_leaves_while_the_socket_is_busy(
    backend, alice_token, monkeypatch
):
    # The turn runs on another worker (nothing runs here): the Stop goes to it from where
    # the frame arrived, while the receive loop is still held on an earlier frame.
    receive_loop = ReceiveLoopHeld(monkeypatch)
    stops = StopsElsewhere()
    monkeypatch.setattr(live, "abort_elsewhere", stops)
    tab, _ = await open_session("/ws/sessions/stop-elsewhere/", alice_token)
    await receive_loop.hold(tab)
    await tab.send_json_to({"type": "abort"})
    try:
        await asyncio.wait_for(stops.arrived.wait(), GUARD_SEC)
        assert not receive_loop.happened  # the receive loop was still on the earlier frame
    finally:
        receive_loop.let_go.set()
    await tab.disconnect()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_stop_that_came_alone_is_sent_once(backend, alice_token, monkeypatch):
    stops = StopsElsewhere()
    monkeypatch.setattr(live, "abort_elsewhere", stops)
    tab, _ = await open_session("/ws/sessions/stop-alone/", alice_token)
    await tab.send_json_to({"type": "abort"})
    await asyncio.wait_for(stops.arrived.wait(), GUARD_SEC)
    # A frame sent after it is answered: the receive loop has read everything before it.
    await tab.send_json_to({"type": "ping"})
    assert (await tab.receive_json_from(timeout=GUARD_SEC))["type"] == "pong"
    assert stops.sent == 1
    await tab.disconnect()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_prompt_sent_just_after_a_stop_starts_once_the_stop_has_gone(
    backend, alice_token, monkeypatch
):
    # The Stop is on its way to another worker when the next prompt arrives: the prompt's
    # turn starts only after it, so the Stop can never reach the turn sent after it.
    on_its_way = asyncio.Event()
    let_go = asyncio.Event()
    happened = []

    async def slow_stop_elsewhere(*, session_id):
        on_its_way.set()
        await let_go.wait()
        happened.append("stop")
        return False

    monkeypatch.setattr(live, "abort_elsewhere", slow_stop_elsewhere)
    turns_noted(monkeypatch, happened)
    tab, _ = await open_session("/ws/sessions/stop-then-prompt/", alice_token)
    await tab.send_json_to({"type": "abort"})
    await asyncio.wait_for(on_its_way.wait(), GUARD_SEC)
    await tab.send_json_to({"type": "prompt", "text": "hello"})
    let_go.set()
    events = await events_until(tab, turn_done)
    assert happened == ["stop", "turn"]
    assert events[-1]["status"] == "completed"
    await tab.disconnect()
