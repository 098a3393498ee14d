"""What every delivery channel is (docs/design.md §16): one class per channel, each in its
own module, listed in the registry (`notices_app.channels`).

A channel says where a user's notices go (`destinations`), sends one notice to one of those
places (`send`), and says when to try again after a failure (`retry_delay`). It never
decides whether a notice may leave the process: the test-session rule is applied once, in
`notices_app.delivery`, before any channel is asked.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings

from jarvis_site.shared.outbound_urls import OutboundTarget, OutboundUrlRefused, outbound_address

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutboundNotice:
    """A notice as it leaves: what was said, in which conversation, for which destination."""

    user: str
    session_id: str
    message_id: str
    content: str
    created_at: str
    destination: str = ""

    def wire(self) -> dict:
        """The notice's own fields, without the destination."""
        return {
            "user": self.user,
            "session_id": self.session_id,
            "message_id": self.message_id,
            "content": self.content,
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class SendResult:
    """How one attempt went. `retry_after` is the receiver's own "come back in N s";
    `gone` says the destination no longer exists and trying again is pointless."""

    ok: bool
    detail: str = ""
    retry_after: float | None = None
    gone: bool = False


SENT = SendResult(ok=True)


class Channel(ABC):
    """One way a notice leaves the process; each subclass is one module of channels/."""

    name = ""
    # None: retry until it works (the operator's webhook); else give up after this many.
    max_attempts: int | None = None

    @abstractmethod
    def destinations(self, user) -> list[str]:
        """Where `user`'s notices go through this channel ("" for the one place); [] is off.
        `user` is None for a session nobody owns."""

    @abstractmethod
    def send(self, notice: OutboundNotice, user) -> SendResult:
        """One attempt; never raises for the receiver's faults (they are a SendResult)."""

    def retry_delay(self, attempts: int) -> timedelta | None:
        """The wait before attempt `attempts + 1`; None: give up. Doubling back-off."""
        if self.max_attempts is not None and attempts >= self.max_attempts:
            return None
        seconds = settings.NOTIFY_RETRY_BASE_SEC * 2 ** max(attempts - 1, 0)
        return timedelta(seconds=min(seconds, settings.NOTIFY_RETRY_MAX_SEC))


def http_post(target: OutboundTarget, **kwargs) -> tuple[SendResult, object | None]:
    """POST once to `target`, never following a redirect; the result and the response (None
    when none).

    The host is resolved here, once, and checked (jarvis_site.shared.outbound_urls): the request goes
    to that checked address, with the URL's own name as Host and for TLS (SNI and the
    certificate), so a second answer from DNS cannot send it elsewhere. A refused address
    gives up (`gone`). A 2xx is success; a 3xx is a failure (a redirect could lead anywhere);
    a 429 or 503 passes on the receiver's Retry-After.
    """
    import httpx  # here: every process loads the channels at start-up, few ever send

    try:
        address = outbound_address(target)
    except OutboundUrlRefused as refused:
        return SendResult(ok=False, detail=str(refused), gone=True), None
    except OSError as error:  # the name does not resolve (now): try again later
        return SendResult(ok=False, detail=f"{target.host} does not resolve: {error}"), None
    headers = {**kwargs.pop("headers", {}), "Host": target.url.netloc.decode("ascii")}
    try:
        with httpx.Client(follow_redirects=False, timeout=settings.NOTIFY_TIMEOUT_SEC) as client:
            response = client.post(
                target.url.copy_with(host=address),
                headers=headers,
                extensions={"sni_hostname": target.host},
                **kwargs,
            )
    except httpx.HTTPError as error:
        return SendResult(ok=False, detail=f"{type(error).__name__}: {error}"), None
    if 200 <= response.status_code < 300:
        return SENT, response
    return (
        SendResult(
            ok=False,
            detail=f"HTTP {response.status_code}: {response.text[:200]}",
            retry_after=_retry_after(response),
        ),
        response,
    )


def _retry_after(response) -> float | None:
    if response.status_code not in {429, 503}:
        return None
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None
