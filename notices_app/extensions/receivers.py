"""Receivers of notices_app: one-line calls into its services (connected in AppConfig.ready)."""

from notices_app import delivery


def on_notice_added(sender, session_id, notice, **kwargs):
    delivery.notice_outbound_enqueue(session_id=session_id, notice=notice)


def on_session_deleted(sender, session_id, **kwargs):
    delivery.notice_outbox_purge_for_session(session_id=session_id)
