"""The lease keeper's one read for every turn of a process (`DbTurnLease.keep`): it renews
the leases about to lapse, leaves fresh ones alone, and names the turns that must stop — an
abort mark, a lease someone else took — across more ids than one statement binds."""

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.models import Session
from sessions_app.store import get_store
from sessions_app.store.db_lease import ABORT_MARK, LEASE_TTL_SEC, DbTurnLease, request_abort

pytestmark = pytest.mark.django_db(transaction=True)


def held(session_id: str, owner, *, expires_in: float) -> DbTurnLease:
    get_store().create(session_id, owner_id=owner.id)
    lease = get_store().turn_lease(session_id)
    assert lease.try_acquire()
    Session.objects.filter(id=session_id).update(
        lease_expires_at=timezone.now() + timedelta(seconds=expires_in)
    )
    return lease


def expiry(session_id: str):
    return Session.objects.get(id=session_id).lease_expires_at


def test_a_lease_about_to_lapse_is_renewed_and_a_fresh_one_is_left(alice):
    lapsing = held("lapsing", alice, expires_in=1)
    fresh = held("fresh", alice, expires_in=LEASE_TTL_SEC)
    fresh_expiry = expiry("fresh")

    assert DbTurnLease.keep([lapsing, fresh]) == []

    assert expiry("lapsing") > timezone.now() + timedelta(seconds=LEASE_TTL_SEC - 5)
    assert expiry("fresh") == fresh_expiry


def test_turns_marked_for_abort_or_taken_over_are_named_to_stop(alice):
    aborted = held("aborted", alice, expires_in=1)
    taken = held("taken", alice, expires_in=LEASE_TTL_SEC)
    running = held("running", alice, expires_in=LEASE_TTL_SEC)
    assert request_abort("aborted")
    Session.objects.filter(id="taken").update(lease_holder="another-worker:1:2:token")

    stopping = DbTurnLease.keep([aborted, taken, running])

    assert stopping == [aborted, taken]
    # The aborted turn still holds its (marked) lease until it closes: it is renewed.
    assert Session.objects.get(id="aborted").lease_holder == aborted.holder + ABORT_MARK
    assert expiry("aborted") > timezone.now() + timedelta(seconds=LEASE_TTL_SEC - 5)


def test_a_deleted_session_is_skipped(alice):
    gone = held("gone", alice, expires_in=1)
    kept = held("kept", alice, expires_in=1)
    Session.objects.filter(id="gone").delete()

    assert DbTurnLease.keep([gone, kept]) == []
    assert expiry("kept") > timezone.now() + timedelta(seconds=LEASE_TTL_SEC - 5)


def test_more_leases_than_one_statement_binds(alice):
    # Past SQLite's 999 bound parameters: the read goes in batches and misses none.
    leases = [get_store().turn_lease(f"many-{index:04d}") for index in range(1_100)]
    now = timezone.now()
    soon = now + timedelta(seconds=1)
    Session.objects.bulk_create(
        Session(
            id=lease.session_id,
            owner=alice,
            created_at=now,
            updated_at=now,
            lease_holder=lease.holder,
            lease_expires_at=soon,
        )
        for lease in leases
    )
    Session.objects.filter(id="many-0500").update(lease_holder=leases[500].holder + ABORT_MARK)

    assert DbTurnLease.keep(leases) == [leases[500]]
    assert not Session.objects.filter(id__startswith="many-", lease_expires_at__lte=soon).exists()
