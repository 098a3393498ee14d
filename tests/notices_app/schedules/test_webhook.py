"""Outbound delivery: a real HTTP receiver on 127.0.0.1 gets each notice of a real session
exactly once, retried until it answers 2xx, and nothing of a test session."""

from datetime import timedelta

import pytest
from django.utils import timezone

from notices_app.delivery import notice_outbox_recover, notice_send
from notices_app.models import NoticeOutbox
from notices_app.services.schedules import schedule_create
from sessions_app.services import deletion, notices, sessions
from sessions_app.store import get_store

from .conftest import (
    Receiver,
    fan_out_notices,
    let_send_to,
    make_due,
    ready_tasks,
    run_due_tasks,
    run_worker_until,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_notice_of_a_real_session_is_posted_once(backend, alice, receiver):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    notice, _ = notices.proactive_add(session_id="chat-1", message_id="m1", content="hello")
    notices.proactive_add(session_id="chat-1", message_id="m1", content="hello")  # same id
    schedule = schedule_create(owner_id=alice.id, session_id="chat-1", text="stretch", in_seconds=9)
    make_due(schedule)
    run_due_tasks()
    run_due_tasks()  # a second pass finds nothing more to send

    assert [post["body"]["message_id"] for post in receiver.posts] == [
        "m1",
        f"schedule:{schedule.id}:{schedule.next_run_at.isoformat()}",
    ]
    first = receiver.posts[0]
    assert first["body"] == {
        "user": "alice",
        "session_id": "chat-1",
        "message_id": "m1",
        "content": "hello",
        "created_at": notice.created_at.isoformat(),
    }
    assert first["content_type"] == "application/json"
    assert first["idempotency_key"] == "chat-1/m1"
    # A 2xx from the webhook is a delivery.
    assert all(n.delivered_at is not None for n in get_store().get_proactive("chat-1"))
    assert set(NoticeOutbox.objects.values_list("state", flat=True)) == {"sent"}


def test_a_test_session_never_notifies_anyone_outside(backend, alice, receiver):
    sessions.session_create(owner_id=alice.id, session_id="test-run")
    notices.proactive_add(session_id="test-run", message_id="m1", content="hello")
    schedule = schedule_create(
        owner_id=alice.id, session_id="test-run", text="stretch", in_seconds=9
    )
    make_due(schedule)
    run_due_tasks()
    assert len(get_store().get_proactive("test-run")) == 2
    assert receiver.posts == []
    assert not NoticeOutbox.objects.exists()
    assert get_store().get_proactive("test-run")[0].delivered_at is None


def test_a_failing_receiver_gets_retries_and_then_exactly_one_success(backend, alice, receiver):
    receiver.failures = 3
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    notices.proactive_add(session_id="chat-1", message_id="m1", content="hello")
    fan_out_notices()
    outbox = NoticeOutbox.objects.get()

    run_worker_until(lambda: receiver.posts)
    run_due_tasks()
    outbox.refresh_from_db()
    assert (outbox.state, outbox.attempts) == ("sent", 4)
    assert [post["body"]["message_id"] for post in receiver.posts] == ["m1"]
    assert ready_tasks("send_notice") == []
    # Once sent, a stray attempt (a duplicate task) sends nothing.
    assert notice_send(outbox_id=outbox.id) == "skipped"
    assert len(receiver.posts) == 1


def test_an_unreachable_receiver_is_logged_and_retried_with_growing_delays(alice, settings, caplog):
    dead = Receiver()
    dead.close()  # nothing listens on its port any more
    let_send_to(settings, dead)
    settings.NOTIFY_RETRY_BASE_SEC = 60
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    notices.proactive_add(session_id="chat-1", message_id="m1", content="hello")
    fan_out_notices()
    outbox = NoticeOutbox.objects.get()
    for delay in (60, 120, 240):
        # The next attempt is `delay` after this one failed: some moment of the call, however
        # long a busy machine takes over it.
        before = timezone.now()
        assert notice_send(outbox_id=outbox.id) == "retry"
        after = timezone.now()
        outbox.refresh_from_db()
        waits = timedelta(seconds=delay)
        assert before + waits <= outbox.next_attempt_at <= after + waits
    assert outbox.state == "pending" and "ConnectError" in outbox.last_error
    assert "notice chat-1:m1 via webhook: attempt 3 failed" in caplog.text
    # Never lost: the next attempt waits in the queue.
    (queued,) = [t for t in ready_tasks("send_notice") if str(t.id) == outbox.task_id]
    assert queued.run_after == outbox.next_attempt_at


def test_an_attempt_cut_off_by_a_dead_worker_is_sent_again(alice, receiver):
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    notices.proactive_add(session_id="chat-1", message_id="m1", content="hello")
    fan_out_notices()
    # A worker claimed the row and died before it could say how the POST went.
    from datetime import timedelta

    from django.utils import timezone
    from django_tasks_db.models import DBTaskResult

    long_ago = timezone.now() - timedelta(hours=1)
    NoticeOutbox.objects.update(state="sending", claimed_at=long_ago, attempts=1)
    DBTaskResult.objects.update(status="RUNNING", started_at=long_ago)
    run_due_tasks()
    assert receiver.posts == []
    assert notice_outbox_recover() == 1
    run_due_tasks()
    assert [post["body"]["message_id"] for post in receiver.posts] == ["m1"]
    assert NoticeOutbox.objects.get().state == "sent"


def test_deleting_the_session_drops_its_queued_posts(alice, receiver):
    receiver.failures = 100
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    notices.proactive_add(session_id="chat-1", message_id="m1", content="private")
    deletion.session_delete(session_id="chat-1", owner_id=alice.id)
    assert not NoticeOutbox.objects.exists()
    run_due_tasks()
    assert receiver.posts == []


def test_a_webhook_name_resolving_to_a_private_address_is_refused_at_send_time(
    alice, settings, receiver
):
    """The allowlist names the receiver as 127.0.0.1 with its port; `localhost` is another
    name, resolved when the notice is sent, to an address inside the machine: nothing goes."""
    settings.NOTIFY_WEBHOOK_URL = receiver.url.replace("127.0.0.1", "localhost")
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    notices.proactive_add(session_id="chat-1", message_id="m1", content="hello")
    fan_out_notices()
    outbox = NoticeOutbox.objects.get()

    assert notice_send(outbox_id=outbox.id) == "failed"
    outbox.refresh_from_db()
    assert "localhost resolves to" in outbox.last_error
    assert "private network" in outbox.last_error
    assert receiver.posts == []


def test_a_webhook_url_that_is_not_https_is_refused_without_outbound_allow_http(
    alice, settings, receiver
):
    settings.OUTBOUND_ALLOW_HTTP = False
    sessions.session_create(owner_id=alice.id, session_id="chat-1")
    notices.proactive_add(session_id="chat-1", message_id="m1", content="hello")
    fan_out_notices()
    outbox = NoticeOutbox.objects.get()

    assert notice_send(outbox_id=outbox.id) == "failed"
    outbox.refresh_from_db()
    assert "OUTBOUND_ALLOW_HTTP" in outbox.last_error
    assert receiver.posts == []
