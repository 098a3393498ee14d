"""WebSocket URL routes of the whole site (HTTP routes live in urls.py)."""

from sessions_app.web.routing import websocket_urlpatterns as session_routes

websocket_urlpatterns: list = [*session_routes]
