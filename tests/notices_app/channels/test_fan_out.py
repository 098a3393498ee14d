"""A notice's fan-out is the task worker's: the request or turn that adds a notice writes
one task, whatever the number of destinations, and the worker writes each destination's
outbox row and send task, a batch per transaction (docs/design.md §27)."""

import pytest
from django_tasks_db.models import DBTaskResult

from notices_app import delivery
from notices_app.models import NoticeOutbox
from tests.notices_app.schedules.conftest import fan_out_notices, ready_tasks, run_due_tasks

from .conftest import PushBrowser, allow
from .test_channels import notify, subscribe

pytestmark = pytest.mark.django_db(transaction=True)

BROWSERS = 25


@pytest.fixture
def many_browsers(settings, alice, vapid, fake, monkeypatch):
    push = fake()
    allow(settings, push)
    settings.MAX_PUSH_SUBSCRIPTIONS_PER_USER = BROWSERS
    monkeypatch.setattr(delivery, "FAN_OUT_BATCH", 10)
    browsers = [PushBrowser(push.url(f"/browser-{n}")) for n in range(BROWSERS)]
    for browser in browsers:
        subscribe(alice.id, browser)
    return push, browsers


def test_adding_a_notice_queues_one_task_whatever_the_destinations(alice, many_browsers):
    notify(alice.id, "stretch")

    assert not NoticeOutbox.objects.exists()
    assert [task.task_path.rsplit(".", 1)[-1] for task in DBTaskResult.objects.all()] == [
        "fan_out_notice"
    ]


def test_the_worker_fans_it_out_to_every_browser_once(alice, many_browsers):
    push, browsers = many_browsers
    notify(alice.id, "stretch")

    run_due_tasks()

    assert NoticeOutbox.objects.filter(channel="webpush", state="sent").count() == BROWSERS
    by_path = {received.path: received for received in push.received}
    assert sorted(by_path) == sorted(f"/browser-{n}" for n in range(BROWSERS))
    for n, browser in enumerate(browsers):
        assert browser.decrypt(by_path[f"/browser-{n}"].body)["content"] == "stretch"


def test_a_fan_out_run_twice_queues_nothing_more(alice, many_browsers):
    notify(alice.id, "stretch")
    (queued,) = ready_tasks("fan_out_notice")
    args = queued.args_kwargs["args"]

    fan_out_notices()
    assert len(ready_tasks("send_notice")) == BROWSERS
    fields = ("session_id", "message_id", "content", "created_at")
    assert delivery.notice_fan_out(**dict(zip(fields, args, strict=True))) == 0
    assert NoticeOutbox.objects.count() == BROWSERS
    assert len(ready_tasks("send_notice")) == BROWSERS
