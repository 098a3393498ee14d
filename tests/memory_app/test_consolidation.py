"""Consolidation: episodes become the user's profile facts and procedure drafts (docs/design.md §9)."""

import signal
import subprocess
import sys
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db.models import Max
from django_tasks_db.models import DBTaskResult

from memory_app.extraction import extract_facts
from memory_app.models import Episode, Procedure, ProfileFact
from memory_app.services import memory_consolidate, procedure_approve, procedure_reject
from memory_app.tasks import memory_consolidate_idle
from sessions_app.core import signals
from tests.builders import arithmetic_turn, play_turn
from tests.helpers import GUARD_SEC, REPO, child_env, eventually

pytestmark = pytest.mark.django_db

IDLE = 180


def facts_of(user) -> dict[str, str]:
    return dict(ProfileFact.objects.filter(owner=user).values_list("key", "text"))


def newest_episode_time(session_id):
    return Episode.objects.filter(session_id=session_id).aggregate(t=Max("created_at"))["t"]


# --- what is extracted ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My name is Alice Smith.", [("name", "The user's name is Alice Smith.")]),
        ("Hi, call me Al and tell me a joke", [("name", "The user's name is Al.")]),
        ("I live in Berlin, near the river.", [("home", "The user lives in Berlin.")]),
        ("I'm from Porto", [("origin", "The user is from Porto.")]),
        ("I really love green tea!", [("likes:green tea", "The user loves green tea.")]),
        ("I prefer short answers", [("likes:short answers", "The user prefers short answers.")]),
        (
            "My favorite color is teal",
            [("favorite:color", "The user's favorite color is teal.")],
        ),
        (
            "Please remember that my locker code is 4711.",
            [("my:locker code", "The user's locker code is 4711.")],
        ),
        ("Remember that my name is Zoe", [("name", "The user's name is Zoe.")]),
        ("What is my name?", []),
        ("Do I like tea?", []),
        ("I'd like to know the time", []),
        ("What is 2+2?", []),
    ],
)
def test_statements_about_the_user_become_fact_candidates(text, expected):
    assert [(fact.key, fact.text) for fact in extract_facts(text)] == expected


# --- when it runs --------------------------------------------------------------------------
def test_an_idle_session_is_consolidated_once_the_idle_time_has_passed(
    settings, alice, django_capture_on_commit_callbacks
):
    settings.CONSOLIDATE_IDLE_SEC = IDLE
    play_turn(
        "s-idle", "My name is Alice. I live in Lisbon.", "Nice to meet you!", owner_id=alice.id
    )
    play_turn("s-idle", "I love jazz", "Good taste.", owner_id=alice.id)
    play_turn("s-busy", "I'm from Oslo", "Noted.", owner_id=alice.id)
    newest = newest_episode_time("s-idle")
    # s-busy is still talking: its newest episode is a minute younger.
    Episode.objects.filter(session_id="s-busy").update(created_at=newest + timedelta(seconds=60))

    with django_capture_on_commit_callbacks(execute=True):
        assert memory_consolidate_idle(now=newest + timedelta(seconds=IDLE - 1)) == []
    assert facts_of(alice) == {}

    with django_capture_on_commit_callbacks(execute=True):
        assert memory_consolidate_idle(now=newest + timedelta(seconds=IDLE + 1)) == ["s-idle"]
    assert facts_of(alice) == {
        "name": "The user's name is Alice.",
        "home": "The user lives in Lisbon.",
        "likes:jazz": "The user loves jazz.",
    }
    assert not Episode.objects.filter(session_id="s-idle", consolidated_at__isnull=True).exists()
    assert Episode.objects.filter(session_id="s-busy", consolidated_at__isnull=True).count() == 1

    # Consolidated sessions are not picked again; s-busy is, once it too has been idle.
    with django_capture_on_commit_callbacks(execute=True):
        later = newest + timedelta(seconds=60 + IDLE + 1)
        assert memory_consolidate_idle(now=later) == ["s-busy"]
    assert facts_of(alice)["origin"] == "The user is from Oslo."
    assert memory_consolidate_idle(now=later) == []


def test_a_session_that_ends_is_consolidated_after_the_commit(
    alice, django_capture_on_commit_callbacks
):
    play_turn("s-end", "My favourite city is Kyoto", "Lovely.", owner_id=alice.id)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        signals.session_ended.send(sender=None, session_id="s-end", owner_id=alice.id)
    # Nothing happens inside the sender's transaction ...
    assert facts_of(alice) == {}
    assert len(callbacks) == 1
    # ... and once it commits, the queued task consolidates the session.
    callbacks[0]()
    assert facts_of(alice) == {"favorite:city": "The user's favorite city is Kyoto."}
    assert Episode.objects.get(session_id="s-end").consolidated


def test_a_session_without_new_episodes_queues_nothing_when_it_ends(
    alice, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        signals.session_ended.send(sender=None, session_id="s-empty", owner_id=alice.id)
    assert not DBTaskResult.objects.exists()


# --- what it produces ------------------------------------------------------------------------
def test_facts_belong_to_the_user_and_a_later_statement_wins(alice, bob):
    play_turn("s-a", "My name is Al.", "Hi Al.", owner_id=alice.id)
    play_turn("s-a", "Actually, my name is Alfred", "Hi Alfred.", owner_id=alice.id)
    play_turn("s-b", "My name is Bob", "Hi Bob.", owner_id=bob.id)
    memory_consolidate(session_id="s-a")
    memory_consolidate(session_id="s-b")
    assert facts_of(alice) == {"name": "The user's name is Alfred."}
    assert facts_of(bob) == {"name": "The user's name is Bob."}
    fact = ProfileFact.objects.get(owner=alice)
    assert fact.source_session_id == "s-a"


def test_a_session_without_owner_teaches_no_one():
    play_turn("s-system", "My name is Cron", "ok")
    assert memory_consolidate(session_id="s-system") == {"episodes": 1, "facts": 0, "procedures": 0}
    assert not ProfileFact.objects.exists()
    assert Episode.objects.get(session_id="s-system").consolidated


def test_three_successes_of_one_task_kind_draft_a_procedure(alice, bob):
    arithmetic_turn("s-p1", "1+1", "2", owner_id=alice.id)
    arithmetic_turn("s-p1", "2*3", "6", owner_id=alice.id)
    # A failure and someone else's success do not count towards alice's three.
    arithmetic_turn("s-p1", "1/0", "error", owner_id=alice.id, status="error")
    arithmetic_turn("s-bob", "5-2", "3", owner_id=bob.id)
    memory_consolidate(session_id="s-p1")
    memory_consolidate(session_id="s-bob")
    assert not Procedure.objects.exists()

    arithmetic_turn("s-p2", "9*9", "81", owner_id=alice.id)
    assert memory_consolidate(session_id="s-p2")["procedures"] == 1

    procedure = Procedure.objects.get()
    assert procedure.owner == alice
    assert procedure.task_kind == "arithmetic"
    assert procedure.status == "draft"
    assert [step["tool"] for step in procedure.steps] == ["calculator", ""]
    successes = Episode.objects.filter(owner=alice, outcome="completed")
    assert sorted(procedure.source_episode_ids) == sorted(successes.values_list("id", flat=True))


def test_talk_without_tools_never_becomes_a_procedure(alice):
    for index in range(4):
        play_turn("s-talk", f"Tell me joke number {index}", "Ha.", owner_id=alice.id)
    memory_consolidate(session_id="s-talk")
    assert not Procedure.objects.exists()


def test_a_judged_procedure_is_not_drafted_again(alice):
    for expression in ("1+1", "2+2", "3+3"):
        arithmetic_turn("s-j", expression, "x", owner_id=alice.id)
    memory_consolidate(session_id="s-j")
    procedure_reject(procedure_id=Procedure.objects.get().pk)

    for expression in ("4+4", "5+5", "6+6"):
        arithmetic_turn("s-j", expression, "x", owner_id=alice.id)
    assert memory_consolidate(session_id="s-j")["procedures"] == 0
    assert list(Procedure.objects.values_list("status", flat=True)) == ["rejected"]

    procedure = procedure_approve(procedure_id=Procedure.objects.get().pk)
    assert procedure.status == "approved"
    assert procedure.decided_at is not None


def test_running_consolidation_again_adds_nothing(alice):
    play_turn("s-again", "My name is Ann and I live in Rome", "Ciao.", owner_id=alice.id)
    for expression in ("1+1", "2+2", "3+3"):
        arithmetic_turn("s-again", expression, "x", owner_id=alice.id)
    first = memory_consolidate(session_id="s-again")
    assert first == {"episodes": 4, "facts": 2, "procedures": 1}
    facts = facts_of(alice)

    assert memory_consolidate(session_id="s-again") == {"episodes": 0, "facts": 0, "procedures": 0}
    # Even over the very same episodes (as if the marks had been lost), nothing doubles.
    Episode.objects.update(consolidated_at=None)
    assert memory_consolidate(session_id="s-again") == {"episodes": 4, "facts": 0, "procedures": 0}
    assert facts_of(alice) == facts
    assert ProfileFact.objects.count() == 2
    assert Procedure.objects.count() == 1


def test_the_command_consolidates_one_session_now(alice, capsys):
    play_turn("s-cmd", "I live in Graz", "ok", owner_id=alice.id)
    call_command("consolidate_memory", "--session", "s-cmd")
    assert "1 episode(s), 1 fact(s)" in capsys.readouterr().out
    assert facts_of(alice) == {"home": "The user lives in Graz."}


# --- through the real task queue ---------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_idle_sweep_queues_tasks_that_the_db_worker_runs(settings, alice):
    """The production path: the sweep command queues, `db_worker` (another process) consolidates."""
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    settings.CONSOLIDATE_IDLE_SEC = IDLE
    play_turn("s-queue", "I'm from Quito", "ok", owner_id=alice.id)
    Episode.objects.update(created_at=newest_episode_time("s-queue") - timedelta(seconds=IDLE + 5))

    call_command("consolidate_memory", "--idle")
    call_command("consolidate_memory", "--idle")  # the task already waits: not queued twice
    assert DBTaskResult.objects.filter(status="READY").count() == 1
    assert facts_of(alice) == {}

    worker = subprocess.run(
        [sys.executable, "manage.py", "db_worker", "--batch", "--no-startup-delay", "--no-reload"],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert worker.returncode == 0, worker.stderr
    assert DBTaskResult.objects.get().status == "SUCCESSFUL"
    assert facts_of(alice) == {"origin": "The user is from Quito."}


@pytest.mark.django_db(transaction=True)
def test_the_sweep_loop_queues_idle_sessions_and_stops_on_sigterm(alice):
    """What `make run` starts beside Daphne: `consolidate_memory --idle --loop SECONDS`."""

    def make_idle(session_id):
        Episode.objects.filter(session_id=session_id).update(
            created_at=newest_episode_time(session_id) - timedelta(seconds=IDLE + 5)
        )

    def queued_for(session_id):
        return [t for t in DBTaskResult.objects.all() if t.args_kwargs["args"] == [session_id]]

    play_turn("s-loop", "I live in Bern", "ok", owner_id=alice.id)
    make_idle("s-loop")
    loop = subprocess.Popen(
        [sys.executable, "manage.py", "consolidate_memory", "--idle", "--loop", "0.2"],
        cwd=REPO,
        env=child_env(CONSOLIDATE_IDLE_SEC=IDLE),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(lambda: queued_for("s-loop"), what="the loop queued s-loop")
        # A session that goes idle now is queued by a later sweep: once it is, that sweep has
        # seen s-loop's task waiting and has not queued it again.
        play_turn("s-loop-later", "I live in Basel", "ok", owner_id=alice.id)
        make_idle("s-loop-later")
        eventually(lambda: queued_for("s-loop-later"), what="a later sweep queued s-loop-later")
        (task,) = queued_for("s-loop")
        assert task.args_kwargs == {"args": ["s-loop"], "kwargs": {}}
    finally:
        loop.send_signal(signal.SIGTERM)
        out, err = loop.communicate(timeout=GUARD_SEC)
    assert loop.returncode == 0, err
    assert out.count("queued consolidation of 1 idle session(s)") == 2
