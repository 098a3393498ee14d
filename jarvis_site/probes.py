"""The operator's endpoints (docs/design.md §19): `/healthz`, `/readyz`, `/metrics`.

They are answered by a middleware placed first, before the Host check, sessions and login:
a load balancer probes a worker by its address, and a probe must neither need a session nor
make one. `/healthz` says the process answers; `/readyz` says it should get traffic (database
reachable and migrated, Redis reachable when configured, not draining, and — with
OVERLOADED_LOOP_LAG_SEC — its event loop not running later than that; a 503 names what is
away: `database`, `redis`, `draining`, `overloaded`; its `details` say why when the sandbox's
`run_code` is not offered); `/metrics` is the
Prometheus text of every process sharing PROMETHEUS_MULTIPROC_DIR. None of them shows data.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpResponse, JsonResponse

from jarvis_site.shared.errors import Code
from jarvis_site.shared.metrics import metrics_exposition
from jarvis_site.shared.middleware import SyncAndAsyncMiddleware
from sessions_app.runtime.loop import loop_lag
from sessions_app.runtime.loop.drain import is_draining
from sessions_app.runtime.sandbox.registry import sandbox_status

logger = logging.getLogger(__name__)

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# A request relayed by a proxy says so in one of these; its peer address is the proxy's.
FORWARDING_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")
REDIS_TIMEOUT_SEC = 2

# A process's code does not change while it runs, so once its migrations are all applied
# they stay applied: the migration graph (slow to load) is read until then, not on every probe.
_migrated = False


def healthz(request) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def readyz(request) -> JsonResponse:
    response = _readiness()
    # A 503 here is an answer, not a server error: Django would log one at ERROR level for
    # every probe of a draining or waiting worker. The reasons are logged where found.
    response._has_been_logged = True
    return response


def _readiness() -> JsonResponse:
    if is_draining():
        return JsonResponse({"status": "draining"}, status=503)
    limit = settings.OVERLOADED_LOOP_LAG_SEC
    if limit and loop_lag.worker_lag() > limit:
        # Its sockets would wait behind the work it has: send new ones elsewhere (§26).
        logger.warning("readiness: the event loop runs %.3f s late", loop_lag.worker_lag())
        return JsonResponse({"status": "overloaded"}, status=503)
    failed = {}
    database = _database_check()
    if database:
        failed["database"] = database
    if settings.REDIS_URL:
        redis = _redis_check()
        if redis:
            failed["redis"] = redis
    if failed:
        # The status names what is away, the database first (nothing works without it): a
        # balancer or an operator reads it at a glance (docs/design.md §32).
        away = "database" if "database" in failed else "redis"
        return JsonResponse({"status": away, "failed": failed}, status=503)
    sandbox = sandbox_status()
    if not sandbox.offered:
        # Ready all the same; the details say why run_code is not offered (docs/design.md §28).
        return JsonResponse({"status": "ok", "details": {"sandbox": sandbox.to_api()}})
    return JsonResponse({"status": "ok"})


def _database_check() -> str:
    """'' when the database answers and every migration is applied, else what is wrong."""
    global _migrated
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        if not _migrated:
            executor = MigrationExecutor(connection)
            unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
            if unapplied:
                return f"{len(unapplied)} migrations not applied"
            _migrated = True
    except DatabaseError:
        logger.warning("readiness: the database cannot be reached", exc_info=True)
        return "unreachable"
    finally:
        # A probe every few seconds must not keep a connection per worker thread open.
        connection.close()
    return ""


def _redis_check() -> str:
    import redis  # a dependency of channels-redis, loaded only where REDIS_URL is set

    client = redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=REDIS_TIMEOUT_SEC,
        socket_connect_timeout=REDIS_TIMEOUT_SEC,
        **settings.REDIS_CONNECTION_OPTIONS,
    )
    try:
        client.ping()
    except redis.RedisError:
        logger.warning("readiness: Redis cannot be reached", exc_info=True)
        return "unreachable"
    finally:
        client.close()
    return ""


def _from_loopback(request) -> bool:
    """The peer is this machine and no proxy relayed the request for someone else."""
    if any(header in request.META for header in FORWARDING_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def metrics(request) -> HttpResponse:
    authorization = request.headers.get("Authorization", "")
    if authorization:
        scheme, _, token = authorization.partition(" ")
        expected = settings.METRICS_TOKEN
        if (
            scheme.lower() != "bearer"
            or not expected
            or not hmac.compare_digest(token.strip().encode(), expected.encode())
        ):
            return JsonResponse(
                {"code": Code.PERMISSION_DENIED, "detail": "wrong metrics token"}, status=403
            )
    elif not _from_loopback(request):
        response = JsonResponse(
            {
                "code": Code.NOT_AUTHENTICATED,
                "detail": "metrics need Authorization: Bearer <METRICS_TOKEN> "
                "from anywhere but this machine",
            },
            status=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(metrics_exposition(), content_type=PROMETHEUS_CONTENT_TYPE)


ENDPOINTS = {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics}


class ProbeMiddleware(SyncAndAsyncMiddleware):
    def call(self, request):
        endpoint = ENDPOINTS.get(request.path)
        if endpoint is None:
            return self.get_response(request)
        return _method_refused(request) or endpoint(request)

    async def acall(self, request):
        endpoint = ENDPOINTS.get(request.path)
        if endpoint is None:
            return await self.get_response(request)
        # The probes read the database and the metrics files: plain code, in a thread.
        return _method_refused(request) or await sync_to_async(endpoint)(request)


def _method_refused(request):
    if request.method in ("GET", "HEAD"):
        return None
    response = JsonResponse({"code": Code.METHOD_NOT_ALLOWED, "detail": "only GET"}, status=405)
    response["Allow"] = "GET, HEAD"
    return response
