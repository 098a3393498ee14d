"""WebSocket routes of sessions_app (docs/design.md §8)."""

from django.urls import path

from sessions_app.web.channels_auth import TokenAuthMiddleware
from sessions_app.web.consumers import SessionConsumer
from sessions_app.web.person_consumer import PersonConsumer

websocket_urlpatterns = [
    # Ids may hold '.' and ':' but never '/'; the consumer validates the rest (close 4400).
    path("ws/sessions/<str:session_id>/", TokenAuthMiddleware(SessionConsumer.as_asgi())),
    # The person's live sessions list (docs/design.md §24), one per tab.
    path("ws/me/", TokenAuthMiddleware(PersonConsumer.as_asgi())),
]
