"""A notice is markdown; the person's words it quotes (a goal's text, a reminder) render as
typed. Rendered with markdown-it-py, the CommonMark renderer the page's markdown-it is a port
of, with the page's two extensions (tables, strikethrough)."""

import html

import pytest
from markdown_it import MarkdownIt

from notices_app.services.goals import goal_create, goal_finish, goal_note_add
from notices_app.services.schedules import schedule_create
from sessions_app.services import sessions
from sessions_app.store import get_store
from tests.notices_app.schedules.conftest import make_due, run_due_tasks

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def shown(markdown: str) -> str:
    """What a reader sees of `markdown`: its text, without the tags it became."""
    rendered = PAGE.render(markdown)
    assert "<em>" not in rendered and "<code>" not in rendered and "<a " not in rendered
    text = rendered.replace("<p>", "").replace("</p>", "").replace("<br />", "")
    return html.unescape(text).strip()


def notices(session_id: str) -> list[str]:
    return [notice.content for notice in get_store().get_proactive(session_id)]


GOAL = "work out what 6*7 is and 2*3, call it _the answer_"


def test_a_goal_s_notices_show_its_text_as_typed(alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    goal = goal_create(owner_id=alice.id, text=GOAL, set_in="chat-1")
    goal_note_add(session_id=goal.session_id, note="halfway")
    goal_finish(session_id=goal.session_id, result="42")

    assert [shown(content) for content in notices("chat-1")] == [
        f"Goal “{GOAL}”: halfway",
        f"Goal done — {GOAL}: 42",
    ]


@pytest.mark.parametrize(
    "words",
    [
        "water the *plants* at 6*7",
        "rename my_file_name and _this_ one",
        "[not a link](https://example.com) and <b>not bold</b> &amp; ~~kept~~",
        "`not code` \\ and a | pipe",
        "first line\n# not a heading",
        "> not a quote\n- not a list\n1. not numbered\n---",
    ],
)
def test_a_reminder_s_notice_shows_its_text_as_typed(alice, words):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    schedule = schedule_create(owner_id=alice.id, session_id="chat-1", text=words, in_seconds=60)
    make_due(schedule)
    run_due_tasks()

    (content,) = notices("chat-1")
    # Line by line: markdown joins a paragraph's lines with a newline too.
    assert shown(content) == "Reminder: " + words


def test_a_reminder_cut_to_the_notice_limit_never_shows_half_an_escape(alice):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    # Escaped, each `*` is two characters: cut at 19,999, the text's part ends on a backslash.
    schedule = schedule_create(
        owner_id=alice.id, session_id="chat-1", text="*" * 10_000, in_seconds=60
    )
    make_due(schedule)
    run_due_tasks()

    (content,) = notices("chat-1")
    assert len(content) <= 20_000
    text = shown(content)
    assert text.startswith("Reminder: ***") and text.endswith("*…")
    assert set(text.removeprefix("Reminder: ").removesuffix("…")) == {"*"}
