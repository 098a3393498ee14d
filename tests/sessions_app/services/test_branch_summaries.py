"""docs/design.md §20: a branch that leaves a path behind says what that path did.

Edit and regenerate branch just before a turn (`POST …/branch/ {at_seq}`, as the page does),
and `/branch at <seq>` does the same from the chat: the branch gets a `branch_summary` entry
after its copied entries, written by the model when one is configured and plainly offline,
and never sent to a model. Also here: a branch's default cut on the jsonl backend after a
crash left the meta file behind the entries, and the context of a session never used.
"""

import pytest

from sessions_app.services import branch_summaries
from sessions_app.store import get_store
from sessions_app.web.commands import command_run
from tests.builders import arithmetic_turn, play_turn
from tests.fakes.llm_server import Reply, serving_the_apps_model

pytestmark = pytest.mark.django_db


def two_turns(owner):
    """Turn one (seq 1-6): 6*7 with the calculator; turn two (seq 7-10): a plain answer."""
    arithmetic_turn("s1", "6*7", "42", owner_id=owner.id)
    play_turn("s1", "Say it in French", "quarante-deux", owner_id=owner.id)
    return get_store().get_messages("s1")


def entries_of(api, session_id):
    return api.get(f"/api/sessions/{session_id}/entries/").json()["entries"]


def test_editing_the_first_request_summarizes_the_abandoned_path(backend, api, alice):
    source = two_turns(alice)
    # The page edits the first message: it branches just before that turn (seq 0).
    branch = api.post("/api/sessions/s1/branch/", {"at_seq": 0}, format="json").json()

    (summary,) = entries_of(api, branch["id"])
    assert (summary["seq"], summary["kind"]) == (1, "branch_summary")
    assert summary["data"]["from_session"] == "s1" and summary["data"]["at_seq"] == 0
    text = summary["data"]["summary"]
    assert "What is 6*7?" in text and "Say it in French" in text
    assert 'calculator({"expression": "6*7"}) → 42' in text
    assert "quarante-deux" in text
    assert [entry.seq for entry in get_store().get_messages("s1")] == [e.seq for e in source]
    markdown = api.get(f"/api/sessions/{branch['id']}/export/?format=md").content.decode()
    assert "### ⑂ Branched from s1 at seq 0" in markdown
    assert "> - Asked: What is 6*7?\n> - Called calculator" in markdown


def test_regenerating_the_last_answer_keeps_the_first_turn_and_summarizes_the_second(
    backend, api, alice
):
    two_turns(alice)
    branch = api.post("/api/sessions/s1/branch/", {"at_seq": 6}, format="json").json()

    entries = entries_of(api, branch["id"])
    assert [entry["seq"] for entry in entries] == [1, 2, 3, 4, 5, 6, 7]
    summary = entries[-1]
    assert summary["kind"] == "branch_summary" and summary["data"]["at_seq"] == 6
    assert "Say it in French" in summary["data"]["summary"]
    assert "6*7" not in summary["data"]["summary"]  # the kept turn is not part of it

    # The summary is the session's, not the model's: no projection carries it, and the
    # branch goes on as a history both providers accept.
    reply = api.post(f"/api/sessions/{branch['id']}/messages/", {"text": "what is 2+3"})
    assert reply.status_code == 200, reply.content
    for fmt in ("openai", "anthropic"):
        context = api.get(f"/api/sessions/{branch['id']}/context/?format={fmt}")
        assert context.status_code == 200, context.content
        assert "Say it in French" not in context.content.decode()


def test_a_cut_inside_a_turn_closes_it_before_the_summary(backend, api, alice):
    two_turns(alice)
    # seq 3 is the calculator call: its result and the turn's end come from the repair.
    branch = api.post("/api/sessions/s1/branch/", {"at_seq": 3}, format="json").json()

    kinds = [(entry["kind"], entry["role"]) for entry in entries_of(api, branch["id"])]
    assert kinds[3:] == [("message", "tool"), ("turn_end", ""), ("branch_summary", "")]
    assert branch["last_seq"] == 6


def test_a_branch_that_abandons_nothing_has_no_summary(backend, api, alice):
    two_turns(alice)
    whole = api.post("/api/sessions/s1/branch/", {}, format="json").json()
    at_end = api.post("/api/sessions/s1/branch/", {"at_seq": 10}, format="json").json()
    for branch in (whole, at_end):
        kinds = {entry["kind"] for entry in entries_of(api, branch["id"])}
        assert "branch_summary" not in kinds and branch["last_seq"] == 10


def test_branch_at_a_seq_from_the_chat(backend, alice):
    two_turns(alice)
    result = command_run(session_id="s1", owner_id=alice.id, line="/branch at 6")
    copy = result.data["session"]
    assert copy["branched_at_seq"] == 6 and copy["last_seq"] == 7
    (summary,) = [e for e in get_store().get_messages(copy["id"]) if e.kind == "branch_summary"]
    assert summary.data["from_session"] == "s1"

    named = command_run(session_id="s1", owner_id=alice.id, line="/branch s1 at 0")
    assert named.data["session"]["last_seq"] == 1


def test_the_model_writes_the_summary_and_a_failing_one_leaves_the_plain_one(
    backend, api, alice, settings
):
    two_turns(alice)
    with serving_the_apps_model(settings) as server:
        server.script(
            Reply(text="- Asked for 42 in French; got quarante-deux."),
            Reply(status=400, error="model overloaded"),
        )
        by_model = api.post("/api/sessions/s1/branch/", {"at_seq": 6}, format="json").json()
        fallback = api.post("/api/sessions/s1/branch/", {"at_seq": 6}, format="json").json()
        asked = server.requests[0]

    assert entries_of(api, by_model["id"])[-1]["data"]["summary"] == (
        "- Asked for 42 in French; got quarante-deux."
    )
    system, question = asked["messages"]
    assert system["content"] == branch_summaries.INSTRUCTIONS
    assert question["content"] == "User: Say it in French\nJarvis: quarante-deux"
    assert entries_of(api, fallback["id"])[-1]["data"]["summary"] == (
        "- Asked: Say it in French\n- Answered: quarante-deux"
    )


def test_on_jsonl_a_default_branch_copies_what_the_entries_hold_not_the_lagging_meta(
    api, alice, settings
):
    settings.JARVIS_SESSION__PERSISTENCE_BACKEND = "jsonl"
    get_store.cache_clear()
    two_turns(alice)
    meta_file = settings.SESSIONS_DIR / "s1.meta.json"
    # A crash after the entries' fsync and before the activity line reached the disk: the
    # meta file says what it said when the session was created.
    meta_file.write_bytes(meta_file.read_bytes().split(b"\n")[0] + b"\n")
    assert get_store().get_meta("s1").last_seq == 0

    branch = api.post("/api/sessions/s1/branch/", {}, format="json")
    assert branch.status_code == 201, branch.content
    assert branch.json()["branched_at_seq"] == 10
    copied = entries_of(api, branch.json()["id"])
    assert [entry["seq"] for entry in copied] == list(range(1, 11))
    assert copied[-1]["kind"] == "turn_end"


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_the_context_of_a_session_never_used_is_200(backend, api, fmt):
    api.post("/api/sessions/", {"id": "fresh"}, format="json")
    response = api.get(f"/api/sessions/fresh/context/?format={fmt}")
    assert response.status_code == 200, response.content
    body = response.json()
    if fmt == "openai":
        assert [message["role"] for message in body["messages"]] == ["system"]
    else:
        assert body["system"] and body["messages"] == []
