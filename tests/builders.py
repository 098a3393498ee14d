"""What tests build: users with their API tokens, and session entries.

Entries come out the way the runtime stores them: a turn is its turn_start, the user's request,
any tool steps, the answer and its turn_end, all sharing one turn id; a test names only what
matters to it. The fixtures `alice`, `bob`, their tokens and clients (tests/conftest.py) are
built here too.
"""

import itertools
import json
from datetime import UTC, datetime
from functools import cache

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import transaction
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from sessions_app.core import signals
from sessions_app.store import EntryRecord, NewEntry, get_store

# --- users and tokens ---------------------------------------------------------------------


def password_of(username: str) -> str:
    return f"pw-{username}"


@cache
def _password_hash(password: str) -> str:
    """The stored form of a test user's password, made once per process: PBKDF2 with
    Django's million rounds takes about a quarter of a second of CPU, and the suite creates
    its users over a thousand times. A salted hash stays valid however often it is reused,
    so signing in (in this process or a server's) checks the password as for any user."""
    return make_password(password)


def make_user(username: str):
    return get_user_model().objects.create(
        username=username, password=_password_hash(password_of(username))
    )


def token_of(user) -> str:
    """The user's API token (created on first use, as `drf_create_token` would)."""
    token, _ = Token.objects.get_or_create(user=user)
    return token.key


def token_client(user) -> APIClient:
    """An API client that sends the user's token, as a program calling the API would."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_of(user)}")
    return client


# --- entries ------------------------------------------------------------------------------

STAMP = datetime(2025, 1, 1, tzinfo=UTC)


def user(text, turn="t1"):
    return NewEntry(role="user", content=text, turn_id=turn)


def assistant(text="", calls=(), turn="t1", model="offline", usage=None):
    return NewEntry(
        role="assistant",
        content=text,
        tool_calls=[dict(c) for c in calls] or None,
        turn_id=turn,
        model=model,
        usage=usage,
    )


def call(call_id, name="calculator", arguments='{"expression": "2+2"}'):
    return {"id": call_id, "name": name, "arguments": arguments}


def result(call_id, text="4", name="calculator", turn="t1", is_error=False):
    return NewEntry(
        role="tool", tool_call_id=call_id, name=name, content=text, turn_id=turn, is_error=is_error
    )


def turn_start(turn="t1"):
    return NewEntry(kind="turn_start", turn_id=turn, data={"model": "offline"})


def turn_end(turn="t1", status="completed"):
    return NewEntry(kind="turn_end", turn_id=turn, data={"status": status, "error": ""})


def turn_entries(
    request: str,
    answer: str,
    *,
    tools=(),
    thought: str = "",
    status: str = "completed",
    turn: str = "t1",
    usage: dict | None = None,
) -> list[NewEntry]:
    """One whole turn: the request, an optional tool step, the answer (if any), turn_end.

    `tools` is a list of (name, arguments dict, result text), called in one step.
    """
    entries = [turn_start(turn), user(request, turn)]
    if tools:
        calls = [
            call(f"{turn}-call{i}", name, json.dumps(arguments))
            for i, (name, arguments, _) in enumerate(tools)
        ]
        entries.append(assistant(thought, calls, turn))
        entries.extend(
            result(c["id"], text, name=c["name"], turn=turn)
            for c, (_, _, text) in zip(calls, tools, strict=True)
        )
    if answer:
        entries.append(assistant(answer, turn=turn, usage=usage))
    entries.append(turn_end(turn, status))
    return entries


def records(entries: list[NewEntry], session_id: str = "s1", start: int = 1) -> list[EntryRecord]:
    """Number entries the way a store would (seq 1, 2, 3, ...), for the pure history functions."""
    return [
        EntryRecord(
            session_id=session_id,
            seq=start + offset,
            created_at=STAMP,
            **{field: getattr(entry, field) for field in NewEntry.__dataclass_fields__},
        )
        for offset, entry in enumerate(entries)
    ]


def crash_mid_step(session_id):
    """What a process killed between storing a step's calls and their results leaves."""
    get_store().append(
        session_id,
        [
            turn_start("t-dead"),
            user("wait 5 s and what is 2+2", "t-dead"),
            assistant(
                calls=[
                    call("c1", "wait", '{"seconds": 5}'),
                    call("c2", "calculator", '{"expression": "2+2"}'),
                ],
                turn="t-dead",
                model="",
            ),
        ],
    )


# --- turns played into a session ---------------------------------------------------------

_turn_numbers = itertools.count(1)


def play_turn(
    session_id: str,
    request: str,
    answer: str,
    *,
    tools=(),
    thought: str = "",
    status: str = "completed",
    owner_id: int | None = None,
    turn_id: str | None = None,
):
    """Store one turn and send `turn_finished`, as the runtime does, without a model.

    The runtime appends a turn's entries and sends the signal in the transaction that stores
    the turn_end; memory is built from that signal. Returns the turn's records.
    """
    store = get_store()
    if store.get_meta(session_id) is None:
        store.create(session_id, owner_id=owner_id)
    turn_id = turn_id or f"t{next(_turn_numbers)}"
    entries = turn_entries(
        request, answer, tools=tools, thought=thought, status=status, turn=turn_id
    )
    with transaction.atomic():
        stored = store.append(session_id, entries)
        signals.turn_finished.send(
            sender=None,
            session_id=session_id,
            owner_id=owner_id,
            turn_id=turn_id,
            status=status,
            entries=stored,
        )
    return stored


def arithmetic_turn(session_id, expression="2+2", value="4", **kwargs):
    return play_turn(
        session_id,
        f"What is {expression}?",
        f"{expression} = {value}",
        tools=[("calculator", {"expression": expression}, value)],
        **kwargs,
    )
