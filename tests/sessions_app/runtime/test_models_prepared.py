"""Every model on the fast path (docs/design.md §26): a session's own model, picked as the
picker does (`PATCH model`, the `session_configure` service), runs on clients prepared before
its turns — at a server's start for every model the deployment names, else once at its first
turn, in a thread — never on clients its turns build, nor with the SDK asking the platform
in a thread per request, as JARVIS_MODEL's turns always did."""

import asyncio
import contextvars
import threading

import openai
import pytest

from sessions_app.runtime.loop.beside import first_call_beside
from sessions_app.runtime.providers import providers_preload
from sessions_app.runtime.providers.openai import OpenAIProvider
from sessions_app.runtime.turn.agents import models_configured
from sessions_app.runtime.turn.turns import turn_run_async
from sessions_app.services.sessions import session_configure
from sessions_app.store import NewEntry, get_store
from tests.fakes.llm_server import Reply, serving_the_apps_model
from tests.helpers import GUARD_SEC

pytestmark = pytest.mark.django_db(transaction=True)

PICKED = "openai:gpt-4.1"
TURNS = 3


@pytest.fixture
def server(settings):
    # Conversations keep their first words as titles: a title is a call of another model.
    settings.TITLE_MODEL = "offline"
    with serving_the_apps_model(settings, "openai:gpt-4o") as running:
        yield running


@pytest.fixture
def observed(monkeypatch):
    """What a model's turns cost beyond their requests: the SDK clients built (and on which
    thread), the SDK's hand-offs to a thread, and the threads the answers were read on."""
    seen = {"built": [], "handed_off": [], "read_on": set()}
    make = OpenAIProvider._make_async_client
    open_stream = OpenAIProvider._open_stream
    to_thread = openai._utils._sync.to_thread

    def counted_make(self, **options):
        seen["built"].append(threading.current_thread().name)
        return make(self, **options)

    def noted_open(self, client, request):
        seen["read_on"].add(threading.current_thread().name)
        return open_stream(self, client, request)

    async def counted_to_thread(function, *args, **kwargs):
        seen["handed_off"].append(function)
        return await to_thread(function, *args, **kwargs)

    monkeypatch.setattr(OpenAIProvider, "_make_async_client", counted_make)
    monkeypatch.setattr(OpenAIProvider, "_open_stream", noted_open)
    monkeypatch.setattr(openai._utils._sync, "to_thread", counted_to_thread)
    return seen


def sessions_on(model: str, owner) -> list[str]:
    ids = []
    for number in range(TURNS):
        ids.append(get_store().create(f"picked-{number}", owner_id=owner.id).id)
        session_configure(session_id=ids[-1], owner_id=owner.id, model=model)
    return ids


def turns_started_at_once(session_ids: list[str], owner) -> list:
    """The sessions' turns at once on one event loop, as a worker runs them: each started
    at once, its first model call beside (runtime.loop.beside), as the socket does."""

    async def scenario():
        turns = []
        for session_id in session_ids:
            context = contextvars.copy_context()
            first_call_beside(context)
            turns.append(
                asyncio.get_running_loop().create_task(
                    turn_run_async(session_id=session_id, text="hi", owner_id=owner.id),
                    context=context,
                )
            )
        async with asyncio.timeout(GUARD_SEC):
            return await asyncio.gather(*turns)

    return asyncio.run(scenario())


def test_a_picked_model_the_deployment_names_runs_on_the_clients_made_at_start(
    server, settings, alice, observed
):
    settings.JARVIS_MODELS = [PICKED]
    providers_preload(models_configured())  # what a server does as it starts (asgi.py)
    built_at_start = len(observed["built"])
    session_ids = sessions_on(PICKED, alice)
    server.script(*(Reply(text="hello") for _ in range(TURNS)))

    results = turns_started_at_once(session_ids, alice)

    assert [result.status for result in results] == ["completed"] * TURNS
    assert [request["model"] for request in server.requests] == ["gpt-4.1"] * TURNS
    # Its clients were made before the turns: none by them, no thread asked per request.
    assert observed["built"][built_at_start:] == []
    assert observed["handed_off"] == []
    assert "jarvis-beside" in observed["read_on"]


def test_a_model_typed_into_the_picker_is_prepared_once_off_the_loop_at_its_first_turns(
    server, alice, observed
):
    providers_preload(models_configured())
    observed["built"].clear()
    session_ids = sessions_on("openai:gpt-4.1-mini", alice)
    server.script(*(Reply(text="hello") for _ in range(TURNS)))

    results = turns_started_at_once(session_ids, alice)

    assert [result.status for result in results] == ["completed"] * TURNS
    assert [request["model"] for request in server.requests] == ["gpt-4.1-mini"] * TURNS
    # One preparation for the three turns that met the model at once, in its own thread:
    # the worker's loop built nothing, and no request asked the platform in a thread.
    assert set(observed["built"]) == {"jarvis-model-prepare"}
    assert len(observed["built"]) == 2
    assert observed["handed_off"] == []


def test_a_call_stopped_while_its_model_is_prepared_leaves_the_others_waiting_for_it(
    server, monkeypatch
):
    provider = OpenAIProvider(
        "gpt-4.1-mini", api_key="test", base_url=server.openai_url, max_retries=0
    )
    started, release = threading.Event(), threading.Event()
    prepare = OpenAIProvider.preload

    def held(self):
        started.set()
        assert release.wait(GUARD_SEC), "the test never let the preparation go on"
        prepare(self)

    monkeypatch.setattr(OpenAIProvider, "preload", held)
    session_id = get_store().create("prepared-once").id
    entries = get_store().append(session_id, [NewEntry(role="user", content="hi")])
    server.script(Reply(text="hello"))

    def call():
        return provider.acomplete(
            entries=entries,
            system_prompt="You are Jarvis.",
            tools=[],
            on_delta=lambda _: None,
            abort=threading.Event(),
        )

    async def scenario():
        stopped, waiting = asyncio.ensure_future(call()), asyncio.ensure_future(call())
        assert await asyncio.to_thread(started.wait, GUARD_SEC)
        stopped.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopped
        release.set()
        async with asyncio.timeout(GUARD_SEC):
            return await waiting

    assert asyncio.run(scenario()).text == "hello"
