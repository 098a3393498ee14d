"""Settings for Jarvis Sessions: one module, every knob read from the environment.

`.env.example` lists every variable. The embedded defaults (SQLite under var/, in-memory
channel layer, offline model) make `make run` work on a bare machine; production sets
DATABASE_URL, REDIS_URL, SECRET_KEY, DEBUG and ALLOWED_HOSTS explicitly.
"""

import os
import re
import secrets
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _local_secret_key() -> str:
    """A secret kept under var/ so local sessions and logins survive a restart."""
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = env.str("SECRET_KEY", default="") or _local_secret_key()
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
# Origins trusted besides the page's own (which Django's CSRF check and the WebSocket origin
# check take from the request's Host): only what is configured. A default naming a port would
# let a page on that port of the same host use this site's cookie, whatever port it runs on.
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_tasks",
    "django_tasks_db",
    # Before sessions_app: their ready() registers their tools (working memory; schedule and
    # unschedule), which sessions_app's ready() expects to find when it checks
    # JARVIS_AGENTS_FILE.
    "memory_app",
    "notices_app",
    "sessions_app",
    # Above the three: retention, download everything, delete my account (docs/design.md §21).
    "accounts_app",
]

MIDDLEWARE = [
    # Before anything that checks the Host header or a login: a load balancer's probe and a
    # Prometheus scrape address a worker by its IP (docs/deploy.md).
    "jarvis_site.probes.ProbeMiddleware",
    # Every log line of a request carries its request_id.
    "jarvis_site.shared.log_context.RequestContextMiddleware",
    # Then the first that sees answers: errors under /api/ are JSON, whoever made them.
    "sessions_app.web.middleware.ApiJsonErrorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A request its client left takes the file readers it started with it (§27).
    "jarvis_site.shared.bounded.RequestChildrenMiddleware",
]

ROOT_URLCONF = "jarvis_site.urls"
ASGI_APPLICATION = "jarvis_site.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                # vapid_public_key: the page's applicationServerKey for Web Push.
                "notices_app.web.context_processors.web_push",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------------------
# POSTGRES_DSN is accepted as an alias of DATABASE_URL (docs/design.md §2).
_database_url = env.str("DATABASE_URL", default="") or env.str("POSTGRES_DSN", default="")
if not _database_url:
    _database_url = f"sqlite:///{VAR_DIR / 'jarvis.sqlite3'}"
DATABASES = {"default": env.db_url_config(_database_url)}
DATABASE_VENDOR = "postgresql" if "postgresql" in DATABASES["default"]["ENGINE"] else "sqlite"
if DATABASE_VENDOR == "postgresql":
    # A server that is unreachable (not refusing) must fail a connection in seconds, not hold
    # a worker's thread for the kernel's minutes: a turn waits through an outage by trying
    # again (docs/design.md §32).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
if DATABASE_VENDOR == "sqlite":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            # Writers take the lock when their transaction begins: two appenders then queue
            # instead of one failing with "database is locked" when it upgrades its lock.
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
# Tests get their own database; JARVIS_TEST_DB names it so that two suites can run side by
# side. SQLite's test database is a file (not memory) so child processes can open it too.
_test_db = env.str("JARVIS_TEST_DB", default="test_jarvis")
if DATABASE_VENDOR == "sqlite":
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"{_test_db}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": _test_db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Session store ------------------------------------------------------------------------
JARVIS_SESSION__PERSISTENCE_BACKEND = env.str("JARVIS_SESSION__PERSISTENCE_BACKEND", default="db")
if JARVIS_SESSION__PERSISTENCE_BACKEND not in {"db", "jsonl", "postgres"}:
    raise ImproperlyConfigured(
        "JARVIS_SESSION__PERSISTENCE_BACKEND must be 'db', 'jsonl' or 'postgres', "
        f"not {JARVIS_SESSION__PERSISTENCE_BACKEND!r}"
    )
if JARVIS_SESSION__PERSISTENCE_BACKEND == "postgres" and DATABASE_VENDOR != "postgresql":
    raise ImproperlyConfigured(
        "JARVIS_SESSION__PERSISTENCE_BACKEND=postgres needs a PostgreSQL DATABASE_URL"
    )
SESSIONS_DIR = Path(env.str("SESSIONS_DIR", default="~/.jarvis/sessions")).expanduser()
EXPORTS_DIR = Path(env.str("EXPORTS_DIR", default="~/.jarvis/exports")).expanduser()
TEST_SESSION_PREFIXES = ("test-", "live-", "probe-", "exp-")

# --- Channels -----------------------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
# channels-redis waits for a socket's next message with BRPOP, 5 s at a time. redis-py's read
# timeout must be longer than that, or a quiet socket's wait fails with TimeoutError and its
# WebSocket closes (redis-py 8 defaults to 5 s). Connecting still fails fast.
REDIS_SOCKET_TIMEOUT_SEC = 30
REDIS_CONNECT_TIMEOUT_SEC = 5
# Every WebSocket of a worker process receives through one Redis list ("specific.*" channels),
# and group_send drops what does not fit, silently. A turn sends ~10 events plus at most 20
# coalesced `delta`s a second, so 10,000 gives a worker with a hundred busy tabs several
# seconds of slack. Each socket's own buffer inside the process holds CHANNEL_CAPACITY.
CHANNEL_CAPACITY = 1_000
PROCESS_CHANNEL_CAPACITY = 10_000
# redis-py names itself to the server on every new connection (CLIENT SETINFO), and reads
# its own version for that from the package's metadata file each time: under a burst of
# sockets closing at once, each opening a connection for its group_discard, 8% of a worker's
# CPU (docs/performance.md). The name is only shown in CLIENT LIST.
REDIS_CONNECTION_OPTIONS = {"driver_info": None}
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # channels-redis's layer, whose sockets outlast a Redis outage (§32).
            "BACKEND": "jarvis_site.shared.redis_layer.OutlastingRedisChannelLayer",
            # redis-py 8 caps a pool at 100 connections (7 had no cap): a worker with a
            # couple of hundred sockets ran out, and its group sends failed.
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": REDIS_SOCKET_TIMEOUT_SEC,
                        "socket_connect_timeout": REDIS_CONNECT_TIMEOUT_SEC,
                        "socket_keepalive": True,
                        "max_connections": 1000,
                        **REDIS_CONNECTION_OPTIONS,
                    }
                ],
                "capacity": CHANNEL_CAPACITY,
                "channel_capacity": {"specific.*": PROCESS_CHANNEL_CAPACITY},
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "jarvis_site.shared.layers.InProcessChannelLayer",
            "CONFIG": {"capacity": CHANNEL_CAPACITY},
        }
    }

# --- Cache (rate limits) ------------------------------------------------------------------
# The throttles count in Django's cache (sessions_app/core/throttles.py). With several workers
# it must be one cache, or each worker grants a person the whole budget again: Redis, in
# REDIS_URL's database under a prefix of its own. A throttle's check is on the path of every
# prompt, so the cache gives up quickly when Redis is away (the throttle then lets the
# request through rather than failing it) instead of holding a worker for the channel
# layer's 30 s.
CACHE_KEY_PREFIX = "jarvis-cache"
REDIS_CACHE_TIMEOUT_SEC = 0.5
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "jarvis_site.shared.redis_cache.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": CACHE_KEY_PREFIX,
            "OPTIONS": {
                "socket_timeout": REDIS_CACHE_TIMEOUT_SEC,
                "socket_connect_timeout": REDIS_CACHE_TIMEOUT_SEC,
                **REDIS_CONNECTION_OPTIONS,
            },
        }
    }
else:
    # One process (the embedded default): its own memory is every worker's memory.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "KEY_PREFIX": CACHE_KEY_PREFIX,
        }
    }

# --- Agent runtime ------------------------------------------------------------------------
JARVIS_MODEL = env.str("JARVIS_MODEL", default="offline")
if not (
    JARVIS_MODEL == "offline"
    or (JARVIS_MODEL.startswith(("openai:", "anthropic:")) and JARVIS_MODEL.split(":", 1)[1])
):
    raise ImproperlyConfigured(
        f"JARVIS_MODEL must be 'offline', 'openai:<model>' or 'anthropic:<model>', not {JARVIS_MODEL!r}"
    )
# The model that names a conversation after its first answer (docs/design.md §24): "" is
# JARVIS_MODEL; a small model is enough; `offline` keeps the first prompt's words.
TITLE_MODEL = env.str("TITLE_MODEL", default="")
if TITLE_MODEL and not (
    TITLE_MODEL == "offline"
    or (TITLE_MODEL.startswith(("openai:", "anthropic:")) and TITLE_MODEL.split(":", 1)[1])
):
    raise ImproperlyConfigured(
        f"TITLE_MODEL must be empty, 'offline', 'openai:<model>' or 'anthropic:<model>', not {TITLE_MODEL!r}"
    )
# Models people pick for their sessions (the picker, `PATCH model`, `/model`), comma-separated:
# every worker prepares them at start as it does JARVIS_MODEL (docs/design.md §31), so a
# session on one of them starts as fast. A model named nowhere is prepared at its first turn.
JARVIS_MODELS = [spec.strip() for spec in env.list("JARVIS_MODELS", default=[]) if spec.strip()]
for _spec in JARVIS_MODELS:
    if not (_spec.startswith(("openai:", "anthropic:")) and _spec.split(":", 1)[1]):
        raise ImproperlyConfigured(
            f"JARVIS_MODELS lists 'openai:<model>' or 'anthropic:<model>' models, not {_spec!r}"
        )
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="")
ANTHROPIC_API_KEY = env.str("ANTHROPIC_API_KEY", default="")
ANTHROPIC_BASE_URL = env.str("ANTHROPIC_BASE_URL", default="")


def _positive(name: str, default: float, cast=float):
    value = env(name, cast=cast, default=default)
    if value <= 0:
        raise ImproperlyConfigured(f"{name} must be positive, not {value!r}")
    return value


BUSY_GRACE_SEC = _positive("BUSY_GRACE_SEC", 3.0)
MAX_STEPS = _positive("MAX_STEPS", 8, cast=int)
# Threads a worker gives to turns: store writes (and so database connections), blocking tools.
# SQLite lets one writer in at a time: past three threads the others only wait for its lock
# and hand the interpreter's lock around, which a burst of turns pays for in CPU.
STORE_THREADS = _positive("STORE_THREADS", 3 if DATABASE_VENDOR == "sqlite" else 8, cast=int)
TOOL_THREADS = _positive("TOOL_THREADS", 16, cast=int)
# Threads (and so database connections) a worker gives to its WebSockets' own database work:
# handshakes, snapshots, heartbeats, closes.
SOCKET_THREADS = _positive("SOCKET_THREADS", 4, cast=int)
# A pool thread closes its database connection once it has had no work for this long
# (seconds): work that comes and goes keeps its connection instead of opening a new one each
# time. 0 closes it as soon as the pool runs out of work.
POOL_IDLE_CLOSE_SEC = env.float("POOL_IDLE_CLOSE_SEC", default=2.0)
if POOL_IDLE_CLOSE_SEC < 0:
    raise ImproperlyConfigured(
        f"POOL_IDLE_CLOSE_SEC must be 0 or positive, not {POOL_IDLE_CLOSE_SEC!r}"
    )
# `/readyz` answers 503 `overloaded` while the worker's event loop runs later than this
# (seconds; the worst of the last two seconds), so a proxy stops sending it new sockets.
# 0, the default, never does (docs/deploy.md).
OVERLOADED_LOOP_LAG_SEC = env.float("OVERLOADED_LOOP_LAG_SEC", default=0.0)
if OVERLOADED_LOOP_LAG_SEC < 0:
    raise ImproperlyConfigured(
        f"OVERLOADED_LOOP_LAG_SEC must be 0 (off) or positive, not {OVERLOADED_LOOP_LAG_SEC!r}"
    )
# Turns one user may run at once (more: 429 / error `too_many_turns`).
MAX_TURNS_PER_USER = _positive("MAX_TURNS_PER_USER", 8, cast=int)
# Prompts that may wait for one session's running turn (mode queue or steer; more: 409
# `queue_full`), and how often each worker looks for queues nobody runs (a dead worker's).
MAX_QUEUED_PER_SESSION = _positive("MAX_QUEUED_PER_SESSION", 20, cast=int)
QUEUE_SWEEP_SEC = _positive("QUEUE_SWEEP_SEC", 15.0)
# How long a tool call that needs the person's approval waits for a yes or no.
APPROVAL_TIMEOUT_SEC = _positive("APPROVAL_TIMEOUT_SEC", 300.0)
# The operator's MCP servers (docs/design.md §31): a TOML file; none when empty.
MCP_SERVERS_FILE = env.str("MCP_SERVERS_FILE", default="")
CONSOLIDATE_IDLE_SEC = _positive("CONSOLIDATE_IDLE_SEC", 180.0)
# Daphne sends and receives WebSocket messages of at most 1 MiB (its
# --websocket-max-message-size default): no frame the server sends is larger, and a larger
# inbound frame closes the socket with 1009 (docs/design.md §8).
WEBSOCKET_MESSAGE_MAX_BYTES = 1024 * 1024
# The `session` frame on connect holds the latest entries that fit this many bytes of JSON;
# an entry larger than it travels as a stub the page fetches over HTTP (docs/design.md §8).
SNAPSHOT_BUDGET_BYTES = env.int("SNAPSHOT_BUDGET_BYTES", default=512 * 1024)
if not 16 * 1024 <= SNAPSHOT_BUDGET_BYTES <= WEBSOCKET_MESSAGE_MAX_BYTES * 3 // 4:
    # Above three quarters of a message, the frame's meta, notices and approvals might not fit.
    raise ImproperlyConfigured(
        f"SNAPSHOT_BUDGET_BYTES must be between {16 * 1024} and "
        f"{WEBSOCKET_MESSAGE_MAX_BYTES * 3 // 4}, not {SNAPSHOT_BUDGET_BYTES}"
    )
# A worker process silent this long is dead: its sockets and turn leases count as gone.
WORKER_DEAD_SEC = _positive("WORKER_DEAD_SEC", 10.0)
# Server processes heartbeat from the first socket or turn they serve; the test suite turns
# it off for its own process (its servers, started as child processes, keep it on).
WORKER_HEARTBEAT = env.bool("WORKER_HEARTBEAT", default=True)
# Agents beyond (or overriding) the built-in ones; checked at start-up (docs/agents.md).
JARVIS_AGENTS_FILE = env.str("JARVIS_AGENTS_FILE", default="")
# /cleanup agents removes sub-agent sessions idle this long (or whose parent is gone).
CLEANUP_AGENT_DAYS = _positive("CLEANUP_AGENT_DAYS", 7.0)

# Retention (docs/design.md §21): sessions idle longer than this many days are deleted with
# their memory; unset keeps them forever. A user's own `retention_days` (PATCH /api/me/)
# takes precedence. Test sessions go after TEST_SESSION_RETENTION_DAYS whatever the rest.
RETENTION_DAYS = env.int("RETENTION_DAYS", default=None)
if RETENTION_DAYS is not None and RETENTION_DAYS <= 0:
    raise ImproperlyConfigured(f"RETENTION_DAYS must be positive (or unset), not {RETENTION_DAYS}")
TEST_SESSION_RETENTION_DAYS = _positive("TEST_SESSION_RETENTION_DAYS", 7, cast=int)
# How often `db_worker` runs the retention sweep (the task queues its own next run).
RETENTION_SWEEP_EVERY_SEC = _positive("RETENTION_SWEEP_EVERY_SEC", 3600.0)
# Export files (`/export`, GET …/export/) are the person's copy: kept after their session's
# delete, and removed by the sweep this many days after they were written (docs/design.md §31).
EXPORT_RETENTION_DAYS = _positive("EXPORT_RETENTION_DAYS", 30, cast=int)
# The largest history file POST /api/import/ accepts (a ChatGPT export or an openai-agents
# database); larger: 400 file_too_large.
IMPORT_MAX_BYTES = _positive("IMPORT_MAX_BYTES", 50 * 1024 * 1024, cast=int)
# Files in a conversation (docs/design.md §23). Bytes live once, by their SHA-256, in the
# `blobs` storage: a directory (BLOB_STORAGE_URL unset: var/blobs/; or `file:///path`), or
# an S3-compatible bucket (`s3://<bucket>[/<prefix>]`, through django-storages).
BLOB_STORAGE_URL = env.str("BLOB_STORAGE_URL", default="")
BLOB_DIR = VAR_DIR / "blobs"
BLOB_S3_BUCKET = BLOB_S3_PREFIX = ""
# S3 bucket names: 3-63 lowercase letters, digits, dots and hyphens, a letter or digit at
# either end (a prefix is any key path below it).
_S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
if BLOB_STORAGE_URL.startswith("file://"):
    BLOB_DIR = Path(BLOB_STORAGE_URL.removeprefix("file://")).expanduser()
elif BLOB_STORAGE_URL.startswith("s3://"):
    BLOB_S3_BUCKET, _, BLOB_S3_PREFIX = BLOB_STORAGE_URL.removeprefix("s3://").partition("/")
    BLOB_S3_PREFIX = BLOB_S3_PREFIX.strip("/")
    if not _S3_BUCKET.fullmatch(BLOB_S3_BUCKET) or any(c in BLOB_STORAGE_URL for c in "?#@"):
        raise ImproperlyConfigured(
            f"BLOB_STORAGE_URL must be s3://<bucket>[/<prefix>] with a valid bucket name, "
            f"not {BLOB_STORAGE_URL!r}"
        )
elif BLOB_STORAGE_URL:
    raise ImproperlyConfigured(
        "BLOB_STORAGE_URL must be file:///<directory> or s3://<bucket>[/<prefix>] "
        f"(or unset: var/blobs/), not {BLOB_STORAGE_URL!r}"
    )
# The S3 connection, under django-storages' own names (it reads them from here); unset ones
# fall back to boto3's own lookup (its environment variables, ~/.aws, an instance role).
AWS_S3_ENDPOINT_URL = env.str("AWS_S3_ENDPOINT_URL", default=None)
AWS_ACCESS_KEY_ID = env.str("AWS_ACCESS_KEY_ID", default=None)
AWS_SECRET_ACCESS_KEY = env.str("AWS_SECRET_ACCESS_KEY", default=None)
AWS_S3_REGION_NAME = env.str("AWS_S3_REGION_NAME", default=None)
# The largest file one upload takes (413 too_large), and what one person's files may take
# together (413 quota_exceeded).
UPLOAD_MAX_BYTES = _positive("UPLOAD_MAX_BYTES", 20 * 1024 * 1024, cast=int)
USER_STORAGE_QUOTA_BYTES = _positive("USER_STORAGE_QUOTA_BYTES", 1024 * 1024 * 1024, cast=int)
# The session's sandbox (docs/design.md §28). SANDBOX_BACKEND: empty picks `bwrap` where
# bubblewrap is installed (and its start probe passes), else `none` (no run_code, and
# /readyz's details say why); the names are sessions_app.runtime.sandbox.registry's.
SANDBOX_BACKEND = env.str("SANDBOX_BACKEND", default="")
if SANDBOX_BACKEND not in {"", "bwrap", "none"}:
    raise ImproperlyConfigured(f"SANDBOX_BACKEND must be bwrap or none, not {SANDBOX_BACKEND!r}")
# The sandbox's own Python (`manage.py sandbox_setup` builds it here unless set).
SANDBOX_PYTHON = env.str("SANDBOX_PYTHON", default="") or str(
    VAR_DIR / "sandbox" / "venv" / "bin" / "python"
)
SANDBOX_NETWORK = env.bool("SANDBOX_NETWORK", default=False)
SANDBOX_CPU_SEC = _positive("SANDBOX_CPU_SEC", 30, cast=int)
SANDBOX_WALL_SEC = _positive("SANDBOX_WALL_SEC", 60.0)
SANDBOX_MEMORY_MB = _positive("SANDBOX_MEMORY_MB", 512, cast=int)
SANDBOX_MAX_PROCS = _positive("SANDBOX_MAX_PROCS", 64, cast=int)
SANDBOX_OUTPUT_BYTES = _positive("SANDBOX_OUTPUT_BYTES", 65536, cast=int)
# A run's /workspace is a tmpfs of this size (plus a page per file it is handed), so it caps
# what a run may write in all, one file included; /tmp is a tmpfs of SANDBOX_TMP_MAX_BYTES.
SANDBOX_WORKSPACE_MAX_BYTES = _positive("SANDBOX_WORKSPACE_MAX_BYTES", 200 * 1024 * 1024, cast=int)
SANDBOX_TMP_MAX_BYTES = _positive("SANDBOX_TMP_MAX_BYTES", 100 * 1024 * 1024, cast=int)
SANDBOX_CONCURRENCY = _positive("SANDBOX_CONCURRENCY", 4, cast=int)
# Where runs get their scratch directories (the program's source, the attachments, returned
# files past what is held in memory; removed after each run); empty: the system's temporary
# directory.
SANDBOX_SCRATCH_DIR = env.str("SANDBOX_SCRATCH_DIR", default="")
# A server running as root starts its sandboxes as this unprivileged user (its process
# limit counts that user's processes: as root it would count nothing).
SANDBOX_UID = _positive("SANDBOX_UID", 65534, cast=int)
# How often `db_worker` removes blobs nothing links to (the task queues its own next run).
BLOBS_SWEEP_EVERY_SEC = _positive("BLOBS_SWEEP_EVERY_SEC", 3600.0)
# One import's budget (docs/design.md §27), checked before anything is written: a file
# over IMPORT_MAX_NODES (conversations + tree nodes, or database rows), with a path of more
# than IMPORT_MAX_DEPTH nodes, or unpacking (zip) / reading (SQLite) more than
# IMPORT_MAX_UNPACKED_BYTES is refused whole (413 import_too_large). Branches past
# IMPORT_MAX_BRANCHES sessions or IMPORT_MAX_ENTRIES entries written (a branch's copy of the
# prefix it shares counts) are left out, and the report says so.
IMPORT_MAX_NODES = _positive("IMPORT_MAX_NODES", 100_000, cast=int)
IMPORT_MAX_DEPTH = _positive("IMPORT_MAX_DEPTH", 20_000, cast=int)
IMPORT_MAX_BRANCHES = _positive("IMPORT_MAX_BRANCHES", 1_000, cast=int)
IMPORT_MAX_ENTRIES = _positive("IMPORT_MAX_ENTRIES", 200_000, cast=int)
IMPORT_MAX_UNPACKED_BYTES = _positive("IMPORT_MAX_UNPACKED_BYTES", 200 * 1024 * 1024, cast=int)
# JSON values (every array, object, string, number…) one import's JSON may hold, counted
# before it is parsed: Python keeps each as an object of 50-200 bytes (413 import_too_large).
IMPORT_MAX_JSON_VALUES = _positive("IMPORT_MAX_JSON_VALUES", 3_000_000, cast=int)
# Reading an uploaded file with a parser that can be made slow (a PDF's text, an image's
# thumbnail) runs in a child process with these limits (jarvis_site/shared/bounded.py):
# CPU seconds, wall seconds and address space. Past them the child is killed and the read
# refused (a PDF keeps the pages read by then). docs/design.md §27.
FILE_READ_CPU_SEC = _positive("FILE_READ_CPU_SEC", 4, cast=int)
FILE_READ_WALL_SEC = _positive("FILE_READ_WALL_SEC", 6.0)
FILE_READ_MEMORY_MB = _positive("FILE_READ_MEMORY_MB", 768, cast=int)
if FILE_READ_WALL_SEC < FILE_READ_CPU_SEC:
    raise ImproperlyConfigured(
        f"FILE_READ_WALL_SEC ({FILE_READ_WALL_SEC}) must be at least FILE_READ_CPU_SEC "
        f"({FILE_READ_CPU_SEC})"
    )
# The largest decode a thumbnail makes, in bytes of Pillow's pixels (width × height × the
# bytes its mode keeps per pixel), counted before decoding; larger images get no thumbnail.
THUMB_DECODE_MAX_BYTES = _positive("THUMB_DECODE_MAX_BYTES", 256 * 1024 * 1024, cast=int)
# Proxies in front of the workers that append to X-Forwarded-For; the throttles take the
# client's address from it only this many entries from its end. 0 (the default): the
# header is ignored and the peer's address counts — with the documented nginx, which
# replaces the header and whose workers run `serve --proxy-headers`, that is the client's.
NUM_PROXIES = env.int("NUM_PROXIES", default=0)
if NUM_PROXIES < 0:
    raise ImproperlyConfigured(f"NUM_PROXIES must be 0 or more, not {NUM_PROXIES}")
# `/ws/me/` sockets one person may hold open on one worker (more: closed with 4429).
MAX_PERSON_SOCKETS_PER_USER = _positive("MAX_PERSON_SOCKETS_PER_USER", 20, cast=int)

# USD per million tokens over the built-in table (sessions_app/runtime/turn/usage.py), as JSON:
# {"my-model": {"input": 1.0, "output": 4.0, "cached": 0.25}} ("cached" defaults to the
# input price). A model priced nowhere shows its tokens with `cost_usd: null` (§22).
try:
    MODEL_PRICES = env.json("MODEL_PRICES", default={})
except ValueError as error:
    raise ImproperlyConfigured(f"MODEL_PRICES is not JSON: {error}") from error


def _check_prices(prices) -> None:
    if not isinstance(prices, dict):
        raise ImproperlyConfigured('MODEL_PRICES is a JSON object: {"model": {"input": …}}')
    for model, price in prices.items():
        fields = set(price) if isinstance(price, dict) else set()
        if not {"input", "output"} <= fields or not fields <= {"input", "output", "cached"}:
            raise ImproperlyConfigured(
                f"MODEL_PRICES[{model!r}] has input, output and optionally cached, "
                f"not {price!r:.80}"
            )
        for name, value in price.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ImproperlyConfigured(
                    f"MODEL_PRICES[{model!r}][{name!r}] is a price of 0 or more, not {value!r:.40}"
                )


_check_prices(MODEL_PRICES)
# What the system prompt may spend on the owner's profile facts and approved procedures
# (docs/design.md §22), newest first; 0 sends none.
MEMORY_CONTEXT_TOKENS = env.int("MEMORY_CONTEXT_TOKENS", default=1000)
if MEMORY_CONTEXT_TOKENS < 0:
    raise ImproperlyConfigured(
        f"MEMORY_CONTEXT_TOKENS must be 0 or more, not {MEMORY_CONTEXT_TOKENS}"
    )
# --- Context that fits (docs/design.md §22) -----------------------------------------------
# Windows and output limits of models the built-in table does not know (or overrides), as
# JSON: {"my-model": {"window": 32000, "output": 4000}}.
DEFAULT_CONTEXT_WINDOW = _positive("DEFAULT_CONTEXT_WINDOW", 128000, cast=int)


def _model_limits(raw: str) -> dict:
    import json  # noqa: PLC0415 - only this setting parses JSON

    try:
        limits = json.loads(raw or "{}")
    except ValueError as error:
        raise ImproperlyConfigured(f"MODEL_LIMITS is not JSON: {error}") from error
    if not isinstance(limits, dict) or not all(
        isinstance(value, dict)
        and all(isinstance(value.get(key), int) and value[key] > 0 for key in ("window", "output"))
        and value["output"] < value["window"]
        for value in limits.values()
    ):
        raise ImproperlyConfigured(
            'MODEL_LIMITS must map model names to {"window": N, "output": N} with positive '
            "integers, output below window"
        )
    return limits


MODEL_LIMITS = _model_limits(env.str("MODEL_LIMITS", default=""))
# Tokens kept free for the answer; unset: the model's output limit, at most 16384.
CONTEXT_RESERVE_TOKENS = env.int("CONTEXT_RESERVE_TOKENS", default=None)
if CONTEXT_RESERVE_TOKENS is not None and CONTEXT_RESERVE_TOKENS <= 0:
    raise ImproperlyConfigured(
        f"CONTEXT_RESERVE_TOKENS must be positive (or unset), not {CONTEXT_RESERVE_TOKENS}"
    )
# What an automatic compaction keeps verbatim: the newest turns up to this many tokens.
COMPACTION_KEEP_RECENT_TOKENS = _positive("COMPACTION_KEEP_RECENT_TOKENS", 20000, cast=int)
# The most of one tool result a model is sent (head and tail); the history keeps it whole.
TOOL_RESULT_MAX_TOKENS = _positive("TOOL_RESULT_MAX_TOKENS", 8000, cast=int)

# --- Tasks (consolidation, schedules, notice deliveries) ----------------------------------
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

# --- Outbound delivery of notices (docs/design.md §16) ------------------------------------
# The operator's webhook. Set: every notice of a non-test session is POSTed here.
NOTIFY_WEBHOOK_URL = env.str("NOTIFY_WEBHOOK_URL", default="")
if NOTIFY_WEBHOOK_URL and not NOTIFY_WEBHOOK_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(
        f"NOTIFY_WEBHOOK_URL must be an http:// or https:// URL, not {NOTIFY_WEBHOOK_URL!r}"
    )


def _notify(name: str, default: float) -> float:
    """A delivery setting of every channel, NOTIFY_<name>. Its older name NOTIFY_WEBHOOK_<name>
    (from when the webhook was the only channel) is still read when the new one is unset."""
    if f"NOTIFY_{name}" not in os.environ and f"NOTIFY_WEBHOOK_{name}" in os.environ:
        return _positive(f"NOTIFY_WEBHOOK_{name}", default)
    return _positive(f"NOTIFY_{name}", default)


# Every channel (webhook, Web Push, Discord): one attempt's time limit; a failed attempt is
# retried after RETRY_BASE, then twice as long each time, at most RETRY_MAX.
NOTIFY_TIMEOUT_SEC = _notify("TIMEOUT_SEC", 10.0)
NOTIFY_RETRY_BASE_SEC = _notify("RETRY_BASE_SEC", 5.0)
NOTIFY_RETRY_MAX_SEC = _notify("RETRY_MAX_SEC", 3600.0)
# The webhook retries until it answers; a user's own channels (webpush, discord) give up after
# this many attempts.
NOTIFY_MAX_ATTEMPTS = _positive("NOTIFY_MAX_ATTEMPTS", 10, cast=int)

# Web Push (docs/design.md §16). Unset: the webpush channel is off. `manage.py make_vapid_keys`
# prints a new pair. The public key is the page's applicationServerKey (base64url, the
# uncompressed point); the private key is PEM or the base64url raw scalar.
VAPID_PUBLIC_KEY = env.str("VAPID_PUBLIC_KEY", default="")
VAPID_PRIVATE_KEY = env.str("VAPID_PRIVATE_KEY", default="").replace("\\n", "\n")
VAPID_SUBJECT = env.str("VAPID_SUBJECT", default="")
if VAPID_PRIVATE_KEY and not VAPID_SUBJECT.startswith(("mailto:", "https://")):
    raise ImproperlyConfigured("VAPID_SUBJECT must be a mailto: or https:// URL")
# Browsers one user may subscribe to Web Push (more: 429 too_many_subscriptions); every
# notice is one push per subscription.
MAX_PUSH_SUBSCRIPTIONS_PER_USER = _positive("MAX_PUSH_SUBSCRIPTIONS_PER_USER", 10, cast=int)
# How long a push service keeps a notice for a device that is offline.
WEBPUSH_TTL_SEC = _positive("WEBPUSH_TTL_SEC", 86400, cast=int)

# Hosts the server may send to on a user's behalf (push endpoints, Discord webhook URLs):
# `host`, `*.domain` (its subdomains), each with an optional `:port` (else only the scheme's
# default port). Default: the major browser push services and Discord.
OUTBOUND_URL_ALLOWLIST = env.list(
    "OUTBOUND_URL_ALLOWLIST",
    default=[
        "fcm.googleapis.com",
        "updates.push.services.mozilla.com",
        "*.notify.windows.com",
        "*.push.apple.com",
        "web.push.apple.com",
        "discord.com",
        "discordapp.com",
    ],
)
# Whether the server may send to http:// URLs (push endpoints, Discord, NOTIFY_WEBHOOK_URL);
# off, https:// only. On for local fakes and tests, never needed in production (§27).
OUTBOUND_ALLOW_HTTP = env.bool("OUTBOUND_ALLOW_HTTP", default=False)

# --- Schedules (docs/design.md §14) -------------------------------------------------------
# Active schedules one user may have (more: 429 too_many_schedules).
MAX_SCHEDULES_PER_USER = _positive("MAX_SCHEDULES_PER_USER", 100, cast=int)
# The shortest repeat a schedule may have (shorter: 400).
MIN_SCHEDULE_REPEAT_SEC = _positive("MIN_SCHEDULE_REPEAT_SEC", 60, cast=int)

# --- Goals (docs/design.md §25) ------------------------------------------------------------
# Goals one user may have active or paused at once (more: 429 too_many_goals).
MAX_ACTIVE_GOALS_PER_USER = _positive("MAX_ACTIVE_GOALS_PER_USER", 20, cast=int)
# The shortest time between a goal's check-ins (shorter: 400).
GOAL_MIN_CHECK_SEC = _positive("GOAL_MIN_CHECK_SEC", 60, cast=int)
# A check-in that fails is tried again GOAL_RETRY_BASE_SEC later, doubling each time; after
# GOAL_MAX_ERRORS failures in a row the goal is `failed`.
GOAL_RETRY_BASE_SEC = _positive("GOAL_RETRY_BASE_SEC", 60.0)
GOAL_MAX_ERRORS = _positive("GOAL_MAX_ERRORS", 3, cast=int)


# --- REST framework -----------------------------------------------------------------------
def _rate(name: str, default: str) -> str:
    """A throttle rate as DRF reads it: `<count>/<s|m|h|d…>` (checked here: DRF would fail
    on the first request instead)."""
    value = env.str(name, default=default)
    count, _, period = value.partition("/")
    if not (count.isdigit() and int(count) > 0 and period[:1] in ("s", "m", "h", "d")):
        raise ImproperlyConfigured(
            f"{name} must be <count>/<second|minute|hour|day>, not {value!r}"
        )
    return value


REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Every API view declares the errors any request may get (401, 413, 415): docs/design.md §7.
    "DEFAULT_SCHEMA_CLASS": "sessions_app.web.api.ApiSchema",
    # JSON bodies are bounded in size (DATA_UPLOAD_MAX_MEMORY_SIZE) and nesting depth.
    "DEFAULT_PARSER_CLASSES": [
        "sessions_app.web.parsers.LimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # Per user; sessions_app/core/throttles.py says which doors share each scope.
    "DEFAULT_THROTTLE_RATES": {
        "turns": _rate("TURN_THROTTLE_RATE", "60/min"),
        "branches": _rate("BRANCH_THROTTLE_RATE", "30/min"),
        "search": _rate("SEARCH_THROTTLE_RATE", "120/min"),
        "exports": _rate("EXPORT_THROTTLE_RATE", "10/hour"),
        "uploads": _rate("UPLOAD_THROTTLE_RATE", "60/min"),
        "shares": _rate("SHARE_THROTTLE_RATE", "120/min"),
        "files": _rate("FILE_THROTTLE_RATE", "300/min"),
        "imports": _rate("IMPORT_THROTTLE_RATE", "20/hour"),
    },
    # The client's address for throttling (docs/deploy.md, "The proxy").
    "NUM_PROXIES": NUM_PROXIES,
    # Every error body is {"code", "detail"} (docs/design.md §7).
    "EXCEPTION_HANDLER": "sessions_app.web.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Jarvis Sessions API",
    "DESCRIPTION": "Durable conversation sessions for the Jarvis agent.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Request bodies are documented as JSON, what clients send (the import declares its own
    # multipart body): form encodings cannot say a nested object or a missing-vs-empty field.
    "PARSER_WHITELIST": ["sessions_app.web.parsers.LimitedJSONParser"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "sessions_app.web.api.closed_inputs_hook",
    ],
}

# --- Auth, i18n, static -------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "blobs": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(BLOB_DIR), "file_permissions_mode": 0o600},
    },
}
if BLOB_S3_BUCKET:
    STORAGES["blobs"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": BLOB_S3_BUCKET,
            "location": BLOB_S3_PREFIX,
            "default_acl": "private",
            # The app streams the bytes itself (its own checks first): no signed URLs.
            "querystring_auth": False,
            # A blob's name is its content: writing one twice writes the same bytes.
            "file_overwrite": True,
            # An object read past this many bytes spools to disk rather than memory.
            "max_memory_size": 4 * 1024 * 1024,
        },
    }
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
SERVE_STATIC = env.bool("SERVE_STATIC", default=True)

# --- Operations (docs/deploy.md) -----------------------------------------------------------
# A worker sent SIGTERM gives its running turns this long to finish, then aborts them.
DRAIN_TIMEOUT_SEC = _positive("DRAIN_TIMEOUT_SEC", 30.0)
# How long a running turn waits for an unreachable database to store what it has (its answer,
# its steps) before it ends `error` (docs/design.md §32); what it holds is stored once the
# database is back even so.
DB_OUTAGE_HOLD_SEC = _positive("DB_OUTAGE_HOLD_SEC", 30.0)
# /metrics answers loopback without a token; anyone else needs `Authorization: Bearer` it.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# Shared by every process of a host so /metrics sums them (jarvis_site.shared.metrics); unset, each
# process's /metrics shows itself alone. prometheus-client reads it from the environment.
PROMETHEUS_MULTIPROC_DIR = env.str("PROMETHEUS_MULTIPROC_DIR", default="")
if PROMETHEUS_MULTIPROC_DIR:
    Path(PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)

# JSON lines for log collectors (the default); `text` for a person reading a console
# (`make run` sets it). Every line carries request_id, user_id, session_id, turn_id when known.
LOG_FORMAT = env.str("LOG_FORMAT", default="json")
if LOG_FORMAT not in {"json", "text"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be 'json' or 'text', not {LOG_FORMAT!r}")
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "jarvis_site.shared.log_context.ContextFilter"},
        "redis_drops": {"()": "jarvis_site.shared.metrics.RedisDropCounter"},
    },
    "formatters": {
        "json": {
            "()": "jarvis_site.shared.log_context.JsonLinesFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s "
            "%(request_id)s %(user_id)s %(session_id)s %(turn_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
        "text": {
            "()": "jarvis_site.shared.log_context.TextFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s%(context)s: %(message)s",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context"],
        }
    },
    # One handler, on the root: Django's, Daphne's and the libraries' lines come out in the
    # same format as ours.
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "channels_redis.core": {"level": "INFO", "filters": ["redis_drops"]},
        # At DEBUG the model SDKs and their HTTP client log request bodies (the messages):
        # never below INFO, whatever LOG_LEVEL says.
        **{
            name: {"level": "INFO" if LOG_LEVEL.upper() in {"DEBUG", "NOTSET"} else LOG_LEVEL}
            for name in (
                "openai",
                "anthropic",
                "httpx",
                "httpcore",
                "httpx2",
                "httpcore2",
                "aiohttp",
            )
        },
    },
}
