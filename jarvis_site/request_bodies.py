"""Request bodies refused before they are read (docs/design.md §27), for `manage.py serve`.

Daphne's HTTP request is Twisted's: it buffers the whole body (in memory up to 100 kB, in a
temporary file beyond), and before the application runs it parses every `POST` form body
(`multipart/form-data`, `application/x-www-form-urlencoded`) into `request.args`, which
Daphne never reads. A 100 MiB multipart body sent to `/healthz`, with no credentials, cost
1.2 GiB and froze the event loop for seconds; Django's own limits come too late to help.

`BoundedWebRequest` is Daphne's request with that parsing off and a cap on the body for its
path: a `Content-Length` over the cap is answered at once with 413 `too_large` (JSON) and
not a byte of the body is kept; a body sent without a length (chunked) is counted as it
arrives and refused the same way the moment it passes the cap. The cap is
DATA_UPLOAD_MAX_MEMORY_SIZE, except for the uploads named in `UPLOAD_CAPS` and a session's file
uploads (UPLOAD_MAX_BYTES), whose larger cap
applies only to a request carrying credentials (a token or a session cookie: checking them
needs the database, which the application does; here an anonymous request cannot make the
server take a large body). Requests over HTTP/2 do not come this way: Daphne speaks HTTP/2
only over TLS, which `manage.py serve` does not terminate (the proxy does).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from daphne.http_protocol import HTTPFactory, WebRequest
from django.conf import settings

from sessions_app.web.parsers import MULTIPART_ALLOWANCE, RequestTooLarge

# Paths (exactly as sent, before `?`) that take a larger body from a signed-in client.
UPLOAD_CAPS: dict[bytes, Callable[[], int]] = {
    b"/api/import/": lambda: settings.IMPORT_MAX_BYTES + MULTIPART_ALLOWANCE,
}
# A session's file upload, `/api/sessions/<id>/files/` (docs/design.md §23): a session id has
# no `/`, so the path is this prefix, one part, and this suffix.
FILE_UPLOAD_PREFIX = b"/api/sessions/"
FILE_UPLOAD_SUFFIX = b"/files/"


def _upload_cap(path: bytes) -> Callable[[], int] | None:
    cap = UPLOAD_CAPS.get(path)
    if cap is not None:
        return cap
    middle = path[len(FILE_UPLOAD_PREFIX) : -len(FILE_UPLOAD_SUFFIX)]
    if (
        path.startswith(FILE_UPLOAD_PREFIX)
        and path.endswith(FILE_UPLOAD_SUFFIX)
        and middle
        and b"/" not in middle
    ):
        return lambda: settings.UPLOAD_MAX_BYTES + MULTIPART_ALLOWANCE
    return None


# After the refusal the client may still be sending: what arrives is read and dropped for
# this long, so that it gets to read the answer (a socket closed with unread data resets the
# connection, and the client may lose the answer with it). Then the connection is cut.
LINGER_SEC = 2.0


def body_cap(target: bytes, *, has_credentials: bool) -> int | None:
    """The largest body a request to `target` may send; None: no cap (Django's own setting
    turned off)."""
    upload_cap = _upload_cap(target.split(b"?", 1)[0])
    if upload_cap is not None and has_credentials:
        return upload_cap()
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def refusal(cap: int) -> bytes:
    """The whole 413 answer, in the API's error shape."""
    body = json.dumps(
        {
            "code": RequestTooLarge.default_code,
            "detail": f"the request body is larger than {cap} bytes",
        }
    ).encode()
    head = (
        "HTTP/1.1 413 Request Entity Too Large\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class BoundedWebRequest(WebRequest):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)
        self.body_cap: int | None = None
        self.body_received = 0
        self.refused = False

    def gotLength(self, length):
        # Called once the headers are in, before any of the body is read. The channel holds
        # the request target until the whole request has arrived.
        has_credentials = self.requestHeaders.hasHeader(b"Authorization") or (
            settings.SESSION_COOKIE_NAME.encode() in self.received_cookies
        )
        self.body_cap = body_cap(self.channel._path, has_credentials=has_credentials)
        if length is not None and self.body_cap is not None and length > self.body_cap:
            self._refuse()
            return
        super().gotLength(length)

    def handleContentChunk(self, data):
        if self.refused:
            return
        self.body_received += len(data)
        if self.body_cap is not None and self.body_received > self.body_cap:
            self._refuse()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command, path, version):
        # A refused request never reaches the application, even if its last bytes arrived.
        if not self.refused:
            super().requestReceived(command, path, version)

    def _refuse(self) -> None:
        self.refused = True
        # No "100 Continue" for a body that will not be read (Twisted sends it after this).
        self.requestHeaders.removeHeader(b"Expect")
        channel = self.channel
        transport = channel.transport
        transport.write(refusal(self.body_cap))
        # From here on whatever the client sends is dropped as it arrives.
        channel.dataReceived = _drop
        transport.loseWriteConnection()
        channel.callLater(LINGER_SEC, transport.abortConnection)


def _drop(data: bytes) -> None:
    pass


class BoundedHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = BoundedWebRequest
        return protocol
