"""A base for middleware that Django can call in either mode.

Under ASGI (Daphne) a middleware that is only synchronous makes Django run it in a thread and
call the rest of the chain back on the event loop from there (`async_to_sync`): two thread
hops per request, and a thread that waits on the loop. When a server stops while a request is
in flight, the loop stops first and that thread waits for ever, so the process could not exit
until it was killed. A middleware built on this class runs on the loop itself under ASGI and
as plain code under WSGI and Django's test client.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from asgiref.sync import iscoroutinefunction, markcoroutinefunction


class SyncAndAsyncMiddleware(ABC):
    """Subclasses write `call(request)` and `acall(request)`, each calling `get_response` in
    its own mode; Django picks the mode by the handler it wraps."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.acall(request)
        return self.call(request)

    @abstractmethod
    def call(self, request):
        """The middleware's work when Django runs synchronously (WSGI, the test client)."""

    @abstractmethod
    async def acall(self, request):
        """The same work on the event loop (ASGI), awaiting `get_response`."""
