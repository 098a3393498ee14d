"""The benchmark's model (tests/fakes/paced_server.py), through the official OpenAI SDK: the
same rules as the tests' fake, answers paced to their deadline, many streams at once."""

import asyncio

import httpx
import openai
import pytest

from tests.fakes.llm_server import Reply
from tests.fakes.paced_server import PacedStreamServer
from tests.helpers import GUARD_SEC

pytestmark = pytest.mark.anyio

WORDS = " ".join(f"word{index}" for index in range(20))
LATENCY = 0.3
STREAMS = 50


def respond(body: dict) -> Reply:
    if "quick" in str(body["messages"][-1]):
        return Reply(text="5")
    return Reply(text=WORDS, latency=LATENCY, input_tokens=13, output_tokens=20)


@pytest.fixture
def server():
    with PacedStreamServer(respond) as running:
        yield running


def client(server):
    return openai.AsyncOpenAI(base_url=server.openai_url, api_key="bench", max_retries=0)


async def streamed(model: openai.AsyncOpenAI, messages: list[dict]) -> tuple[str, object]:
    stream = await model.chat.completions.create(
        model="bench-model",
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage = "", None
    async with asyncio.timeout(GUARD_SEC):
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            usage = chunk.usage or usage
    return text, usage


async def test_a_streamed_answer_arrives_whole_and_not_before_its_deadline(server):
    text, usage = await streamed(client(server), [{"role": "user", "content": "a story"}])
    assert text == WORDS
    assert (usage.prompt_tokens, usage.completion_tokens) == (13, 20)
    # The fake's own record: its last word left at its deadline or after, never before.
    assert len(server.lateness) == 1 and server.lateness[0] >= 0


async def test_many_streams_at_once_each_arrive_whole(server):
    model = client(server)
    answers = await asyncio.gather(
        *(streamed(model, [{"role": "user", "content": f"story {i}"}]) for i in range(STREAMS))
    )
    assert [text for text, _ in answers] == [WORDS] * STREAMS
    assert len(server.lateness) == STREAMS and server.connections == STREAMS


async def test_a_dangling_tool_call_is_refused_as_the_real_api_does(server):
    history = [
        {"role": "user", "content": "look it up"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": "quick"},
    ]
    with pytest.raises(openai.BadRequestError, match="call_1"):
        await streamed(client(server), history)


async def test_a_request_without_a_key_gets_401(server):
    # The SDK will not send one without a key: a plain HTTP client does.
    async with httpx.AsyncClient(timeout=GUARD_SEC) as plain:
        response = await plain.post(
            f"{server.openai_url}/chat/completions",
            json={"model": "bench-model", "stream": True, "messages": []},
        )
    assert response.status_code == 401
