"""ASGI entry point: `daphne jarvis_site.asgi:application`.

HTTP goes to Django; WebSockets go through the origin check (sessions_app.web.origins) and
authentication to the Channels routes.
"""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jarvis_site.settings")
# Django must be set up before anything imports models (the routes do).
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

if settings.SERVE_STATIC:
    # Local and single-host deployments: Daphne serves the chat's JS/CSS itself, so
    # `make run` needs no separate web server. Behind a proxy, set SERVE_STATIC=false.
    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from jarvis_site.routing import websocket_urlpatterns  # noqa: E402
from sessions_app.runtime.loop.read_first import ReadFirst  # noqa: E402
from sessions_app.runtime.loop.socket_writes import WriteNow  # noqa: E402
from sessions_app.runtime.providers import providers_preload  # noqa: E402
from sessions_app.runtime.turn.agents import models_configured  # noqa: E402
from sessions_app.web.consumers import UnknownPathConsumer  # noqa: E402
from sessions_app.web.origins import OriginCheck  # noqa: E402

# Every model the deployment names, so a session's own is as fast as JARVIS_MODEL (docs/design.md §26).
providers_preload(models_configured())

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": WriteNow(
            ReadFirst(
                OriginCheck(
                    AuthMiddlewareStack(
                        URLRouter(
                            [
                                *websocket_urlpatterns,
                                # Any other path (an id with "/" in it, a typo) closes with 4400
                                # instead of failing the handshake with a server error.
                                re_path(r"", UnknownPathConsumer.as_asgi()),
                            ]
                        )
                    )
                )
            )
        ),
    }
)

# Allocations between two young collections (Python's default is 700).
YOUNG_COLLECTION_EVERY = 20_000
# Young collections between two collections of the middle generation (Python's default is 10).
MIDDLE_COLLECTION_EVERY = 100


def _settle_the_heap() -> None:
    """What the server built at start (Django, the SDKs, the tokenizer: a few hundred thousand
    objects) is never freed: frozen, the collector stops walking it on every full pass. And
    a young collection every 700 new objects runs many times per streamed turn; every
    20,000 it runs a few times per storm of them. Measured in docs/performance.md: the worst
    loop lag of a 200-turn storm fell from 250 to 100 ms, the same CPU.

    The middle generation holds what outlived a young collection: in a storm, every running
    turn's state. A pass over it stopped the worker's loop for 70 to 180 ms in the middle
    of a storm, whenever the count of young passes before the storm (a few HTTP requests
    more or less) put the tenth one there. Every hundredth makes that pause ten times rarer;
    the turns' own garbage is freed by reference counting (a storm of 200 turns leaves about
    a hundred objects in cycles), so little waits in that generation meanwhile."""
    gc.collect()
    gc.freeze()
    *_, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, MIDDLE_COLLECTION_EVERY, oldest)


_settle_the_heap()
