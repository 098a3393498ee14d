"""The one small interface every model provider implements."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from sessions_app.runtime.loop.beside import (
    close_beside_when_gone,
    is_the_side_loop,
    stream_beside,
    takes_the_side_loop,
)
from sessions_app.runtime.loop.eager import request_bodies_sent_at_once
from sessions_app.store.base import EntryRecord

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict  # JSON schema of the arguments object

    def as_dict(self) -> dict:
        """The spec as plain data, sharing its schema (`dataclasses.asdict` deep-copies every
        schema: 8% of a worker's CPU in a storm of turn starts, docs/performance.md)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass
class ModelReply:
    """One model answer: text, tool calls ({id, name, arguments: JSON string}) and usage.

    `stopped` means the user aborted while the answer streamed: `text` is what arrived, and
    tool calls of a cut-off answer are dropped (they may be incomplete).
    """

    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    # input_tokens counts cached ones too (cached_tokens), output_tokens reasoning ones.
    usage: dict = field(
        default_factory=lambda: {
            "input_tokens": 0,
            "output_tokens": 0,
            "cached_tokens": 0,
            "reasoning_tokens": 0,
        }
    )
    model: str = ""
    stopped: bool = False
    # Why the model stopped, in the provider's own words (stop, tool_calls, end_turn,
    # tool_use, max_tokens, …); "" when the provider did not say.
    finish_reason: str = ""
    # Reasoning the provider requires back with the answer's tool use (Anthropic's signed
    # thinking blocks, in the order they came); stored in the assistant entry's data.
    reasoning: list[dict] = field(default_factory=list)


class ProviderError(Exception):
    """The provider refused or failed; the turn ends with status `error` and this text.

    `length_refused`: the provider refused the request as longer than the model's window
    (the turn compacts and tries once more, docs/design.md §22)."""

    def __init__(self, message: str, *, length_refused: bool = False):
        super().__init__(message)
        self.length_refused = length_refused


def sdk_error_text(error: Exception) -> str:
    """The provider's own message from an SDK error body (both SDKs nest it the same way)."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(error)


async def _closed_with_the_loop(clients: dict, loop: asyncio.AbstractEventLoop):
    """Forgets and closes the loop's client when the loop shuts down.

    The SDKs' async clients stream over aiohttp (`DefaultAioHttpClient`), whose sessions must
    be closed on their own loop and hold that loop. A loop that ends through `asyncio.run` (a
    synchronous caller's, a command's) closes the async generators it started first: this
    one, parked at its `yield`, then drops the entry (which would keep the loop alive) and
    closes the client. A server's loop lives as long as its process."""
    try:
        yield
    finally:
        client, _ = clients.pop(loop)
        await client.close()


def _settle_platform(client) -> None:
    """Have the SDK's client know the platform it reports in its headers. The client asks
    at its first request, in a worker thread (the answer may read files), and every request
    that starts before the first answer asks too: a storm's first two hundred requests were
    two hundred thread hand-offs on a loaded loop. Asked once here, while the server starts;
    nothing is done for a client that has no such field."""
    if getattr(client, "_platform", False) is not None:
        return
    # The SDK's module, also for a client class of ours that derives from the SDK's.
    sdk = next(
        (
            module
            for cls in type(client).__mro__
            if (module := sys.modules.get(f"{cls.__module__.split('.')[0]}._base_client"))
        ),
        None,
    )
    get_platform = getattr(sdk, "get_platform", None)
    if get_platform is not None:
        client._platform = get_platform()


class SdkProvider(ABC):
    """What the official-SDK providers share: options, and a client built on first use.

    The client is built lazily so that a missing key is a turn error, not a failed import.
    """

    prefix = ""  # "openai" | "anthropic": JARVIS_MODEL is "<prefix>:<model>"

    def __init__(
        self,
        model: str,
        *,
        api_key: str = "",
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 120.0,
    ):
        self.model = model
        self.label = f"{self.prefix}:{model}"
        self._options = {
            "api_key": api_key or None,
            "base_url": base_url,
            "max_retries": max_retries,
            "timeout": timeout,
        }
        self._client = None
        self._async_clients: dict = {}  # loop -> (client, its closer)
        # Built by `preload`, not yet bound to a loop: the worker's, and the side loop's.
        self._spare_clients: list = []
        # Set once `preload` ran: at a server's start (every configured model), else at the
        # model's first async call, in a thread (`_ready`).
        self._prepared = False
        self._preparing: concurrent.futures.Future | None = None
        self._preparing_lock = threading.Lock()

    @abstractmethod
    def _make_client(self, **options):
        """The SDK client (openai.OpenAI, anthropic.Anthropic) built with these options."""

    @abstractmethod
    def _make_async_client(self, **options):
        """The SDK's async client (openai.AsyncOpenAI, anthropic.AsyncAnthropic)."""

    def _connect(self):
        if self._client is None:
            self._client = self._make_client(**self._options)
        return self._client

    def preload(self) -> None:
        """Do now, in a server that is starting, what the first streamed call would do on the
        worker's event loop: import the async client's HTTP transport (0.6 s of a loaded
        worker's loop, measured in docs/performance.md) and the asyncio backend of the
        library it streams with, and build the client the first loop that asks will use."""
        import anyio  # the SDKs' own dependency, needed only where an SDK model is used

        # Building one loads the CA certificates: 70 ms of the loop at a storm's first turn.
        # Two: the worker's loop and the side loop (runtime.loop.beside) each take one.
        self._spare_clients = [self._make_async_client(**self._options) for _ in range(2)]
        for client in self._spare_clients:
            _settle_platform(client)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            anyio.run(anyio.sleep, 0)
        # else: imported from code that runs on a loop (a test's), which has its backend.
        self._prepared = True

    async def _ready(self) -> None:
        """`preload`, once, for a model the server did not prepare at start (one typed into
        the picker): in a thread of its own, every call that meets the model meanwhile
        waiting for that one preparation. Unprepared, a storm of its first calls built the
        client on the worker's loop and asked the platform in a thread per request (docs/
        design.md §26). A preparation that fails leaves the calls to build what they need."""
        with self._preparing_lock:
            if self._preparing is None:
                self._preparing = concurrent.futures.Future()
                # Running, so that it cannot be cancelled: a turn stopped while it waits
                # cancels its own wait, not the preparation the others wait for.
                self._preparing.set_running_or_notify_cancel()
                threading.Thread(
                    target=self._prepare_into,
                    args=(self._preparing,),
                    name="jarvis-model-prepare",
                    daemon=True,
                ).start()
            preparing = self._preparing
        await asyncio.wrap_future(preparing)

    def _prepare_into(self, done: concurrent.futures.Future) -> None:
        try:
            self.preload()
        except Exception:
            logger.exception("preparing %s failed; its calls build their own clients", self.label)
            self._prepared = True
        finally:
            done.set_result(None)

    async def _aconnect(self):
        # One async client per event loop: its connection pool belongs to the loop that made it.
        loop = asyncio.get_running_loop()
        held = self._async_clients.get(loop)
        if held is None:
            try:  # the worker's loop and the side loop may ask at the same moment
                client = self._spare_clients.pop()
            except IndexError:
                client = self._make_async_client(**self._options)
            request_bodies_sent_at_once(loop)
            closer = _closed_with_the_loop(self._async_clients, loop)
            held = self._async_clients[loop] = (client, closer)
            await anext(closer)
            if is_the_side_loop(loop):
                close_beside_when_gone(self, client)
        return held[0]

    @property
    @abstractmethod
    def parameters(self) -> dict:
        """The request's settings besides model, messages and tools, thinking off."""

    def parameters_for(self, thinking: str) -> dict:  # noqa: ARG002 - a provider may ignore it
        """The settings of a request at this thinking level (docs/design.md §20)."""
        return self.parameters

    @abstractmethod
    def _request(
        self, entries: Sequence[EntryRecord], system_prompt: str, tools, parameters: dict
    ) -> dict:
        """The validated request body in the provider's own shape."""

    def request_body(
        self, *, entries, system_prompt: str, tools, parameters: dict | None = None
    ) -> dict:
        """Exactly the body a call with these arguments sends (also what a replay shows)."""
        return self._request(
            entries, system_prompt, tools, self.parameters if parameters is None else parameters
        )

    @abstractmethod
    def _open_stream(self, client, request: dict):
        """Start the streamed request on `client` (the SDK's create call; awaitable on an
        async client)."""

    @abstractmethod
    def _answer(self, on_delta: Callable[[str], None]) -> StreamedAnswer:
        """A fresh assembler for one streamed answer."""

    @abstractmethod
    def _sdk_errors(self) -> AbstractContextManager:
        """Turns the SDK's errors into ProviderError."""

    def complete(
        self, *, entries, system_prompt, tools, on_delta, abort, parameters=None
    ) -> ModelReply:
        request = self.request_body(
            entries=entries, system_prompt=system_prompt, tools=tools, parameters=parameters
        )
        answer = self._answer(on_delta)
        with self._sdk_errors(), self._open_stream(self._connect(), request) as stream:
            for chunk in stream:
                if abort.is_set():
                    return answer.finish(stopped=True)  # leaving closes the HTTP stream
                answer.feed(chunk)
        return answer.finish(stopped=False)

    async def acomplete(
        self, *, entries, system_prompt, tools, on_delta, abort, parameters=None
    ) -> ModelReply:
        if not self._prepared:
            await self._ready()
        request = self.request_body(
            entries=entries, system_prompt=system_prompt, tools=tools, parameters=parameters
        )
        answer = self._answer(on_delta)
        streamed = self._astream_into(answer, request, abort)
        race = getattr(abort, "race", None)
        if race is None:  # a plain Event: looked at between pieces
            return answer.finish(stopped=await streamed)
        # A Stop does not wait for the model's next piece, nor for the request's clean-up:
        # the answer so far stands (runtime.tools.base.TurnAbort.race).
        stopped, stopped_between_pieces = await race(streamed)
        return answer.finish(stopped=stopped or bool(stopped_between_pieces))

    async def _astream_into(self, answer: StreamedAnswer, request: dict, abort: AbortFlag) -> bool:
        """Feed the model's pieces to `answer`; True when the flag stopped it between two."""
        with self._sdk_errors():
            if takes_the_side_loop():
                return await self._astream_beside(answer, request, abort)
            async with await self._open_stream(await self._aconnect(), request) as stream:
                async for chunk in stream:
                    if abort.is_set():
                        return True
                    answer.feed(chunk)
        return False

    async def _astream_beside(self, answer: StreamedAnswer, request: dict, abort) -> bool:
        """`_astream_into`, the request made and read on the side loop (runtime.loop.beside)."""

        cut = []  # the side loop's reading stopped on the flag

        async def pieces():
            async with await self._open_stream(await self._aconnect(), request) as stream:
                async for chunk in stream:
                    if abort.is_set():
                        cut.append(True)
                        return
                    yield chunk

        def feed(chunk) -> None:
            if abort.is_set():
                raise _StoppedBetweenPieces
            answer.feed(chunk)

        try:
            await stream_beside(pieces, feed)
        except _StoppedBetweenPieces:
            return True
        return bool(cut)


class _StoppedBetweenPieces(Exception):
    pass


class StreamedAnswer(Protocol):
    """Assembles one streamed answer, chunk by chunk (the same for sync and async streams)."""

    def feed(self, chunk) -> None: ...

    def finish(self, *, stopped: bool) -> ModelReply: ...


class AbortFlag(Protocol):
    """What a provider checks while it streams: a threading.Event or an asyncio.Event."""

    def is_set(self) -> bool: ...


class Provider(Protocol):
    """A model. `acomplete` is what turns use (it holds no thread while the model answers);
    `complete` serves synchronous callers such as memory consolidation."""

    label: str  # what JARVIS_MODEL says: offline, openai:<model>, anthropic:<model>
    model: str  # what assistant entries record and cost is priced by
    # The request's settings besides messages and tools (max_tokens, stream, ...) with
    # thinking off; `parameters_for` gives them at a thinking level. A turn stores the ones
    # it used in its request header, so that each request can be rebuilt.
    parameters: dict

    def parameters_for(self, thinking: str) -> dict: ...

    def request_body(
        self,
        *,
        entries: Sequence[EntryRecord],
        system_prompt: str,
        tools: Sequence[ToolSpec],
        parameters: dict | None = None,
    ) -> dict:
        """The body a call with these arguments sends; `parameters` default to the
        provider's own with thinking off."""
        ...

    def complete(
        self,
        *,
        entries: Sequence[EntryRecord],
        system_prompt: str,
        tools: Sequence[ToolSpec],
        on_delta: Callable[[str], None],
        abort: AbortFlag,
        parameters: dict | None = None,
    ) -> ModelReply: ...

    async def acomplete(
        self,
        *,
        entries: Sequence[EntryRecord],
        system_prompt: str,
        tools: Sequence[ToolSpec],
        on_delta: Callable[[str], None],
        abort: AbortFlag,
        parameters: dict | None = None,
    ) -> ModelReply: ...
