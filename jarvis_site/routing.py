"""WebSocket URL routes of the whole site (HTTP routes live in urls.py)."""

websocket_urlpatterns: list = []
