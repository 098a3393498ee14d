"""WebSocket routes of sessions_app (docs/design.md §8)."""

from django.urls import path

from sessions_app.web.channels_auth import TokenAuthMiddleware
from sessions_app.web.consumers import SessionConsumer

websocket_urlpatterns = [
    # Ids may hold '.' and ':' but never '/'; the consumer validates the rest (close 4400).
    path("ws/sessions/<str:session_id>/", TokenAuthMiddleware(SessionConsumer.as_asgi())),
]
