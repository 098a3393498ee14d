"""WebSocket authentication by DRF token, for programs (docs/design.md §6).

Browsers arrive with their Django session cookie (Channels' AuthMiddlewareStack, outside
this middleware, resolves it). Programs send `Authorization: Token <key>` on the handshake;
browsers' WebSocket API cannot set headers, so `?token=<key>` is accepted as well.
"""

from urllib.parse import parse_qs

from django.contrib.auth.models import AnonymousUser
from rest_framework.authtoken.models import Token

from sessions_app.runtime.loop.executors import in_pool


async def _user_for_token(key: str):
    # In the sockets pool, like the rest of a handshake's database work (web/consumers.py).
    return await in_pool("sockets", _user_for_token_sync, key)


def _user_for_token_sync(key: str):
    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return AnonymousUser()
    return token.user


def _token_from_scope(scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            if scheme.lower() == "token" and key.strip():
                return key.strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    keys = query.get("token")
    return keys[0] if keys else None


class TokenAuthMiddleware:
    """Sets scope["user"] from a DRF token when the cookie session did not authenticate."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        if user is None or not user.is_authenticated:
            key = _token_from_scope(scope)
            if key:
                scope = dict(scope, user=await _user_for_token(key))
        return await self.app(scope, receive, send)
