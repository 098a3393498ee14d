"""The entry points (docs/design.md §16, L6): HTTP API, serializers, WebSocket
consumers, slash commands, routing, auth. They parse, call one service or
selector, and shape the answer; nothing below them imports them."""
