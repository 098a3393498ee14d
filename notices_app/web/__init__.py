"""The HTTP API of notices_app: views, routes, serializers, and what every page is given."""
