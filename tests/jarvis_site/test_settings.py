"""Configuration mistakes stop the process at start-up with a message naming the variable."""

import subprocess
import sys

import pytest

from tests.helpers import REPO


def start_django(**env) -> subprocess.CompletedProcess:
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(REPO / "var"), **env}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); print('configured')"],
        cwd=REPO,
        env={"DJANGO_SETTINGS_MODULE": "jarvis_site.settings", **environment},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("JARVIS_SESSION__PERSISTENCE_BACKEND", "mongo", "must be 'db', 'jsonl' or 'postgres'"),
        ("JARVIS_MODEL", "gpt-4o", "JARVIS_MODEL must be 'offline'"),
        ("JARVIS_MODEL", "openai:", "JARVIS_MODEL must be 'offline'"),
        ("BUSY_GRACE_SEC", "-1", "BUSY_GRACE_SEC must be positive"),
        ("MAX_STEPS", "0", "MAX_STEPS must be positive"),
        ("MODEL_PRICES", "{gpt", "MODEL_PRICES is not JSON"),
        ("MODEL_PRICES", '{"m": {"input": 1}}', "MODEL_PRICES['m'] has input, output"),
        ("MODEL_PRICES", '{"m": {"input": 1, "output": -2}}', "is a price of 0 or more"),
        ("MEMORY_CONTEXT_TOKENS", "-1", "MEMORY_CONTEXT_TOKENS must be 0 or more"),
        ("MODEL_LIMITS", "{not json", "MODEL_LIMITS is not JSON"),
        ("MODEL_LIMITS", '{"m": {"window": 8000}}', "MODEL_LIMITS must map model names"),
        ("MODEL_LIMITS", '{"m": {"window": 8000, "output": 9000}}', "output below window"),
        ("CONTEXT_RESERVE_TOKENS", "0", "CONTEXT_RESERVE_TOKENS must be positive"),
        ("DEFAULT_CONTEXT_WINDOW", "-5", "DEFAULT_CONTEXT_WINDOW must be positive"),
        ("BLOB_STORAGE_URL", "gs://blobs", "BLOB_STORAGE_URL must be file:///<directory> or s3"),
        ("BLOB_STORAGE_URL", "s3://", "BLOB_STORAGE_URL must be s3://<bucket>[/<prefix>]"),
        ("BLOB_STORAGE_URL", "s3://My_Blobs/x", "BLOB_STORAGE_URL must be s3://<bucket>"),
        ("BLOB_STORAGE_URL", "s3://key:secret@blobs", "BLOB_STORAGE_URL must be s3://<bucket>"),
        ("BLOB_STORAGE_URL", "s3://blobs/x?region=eu", "BLOB_STORAGE_URL must be s3://<bucket>"),
        ("SANDBOX_BACKEND", "docker", "SANDBOX_BACKEND must be bwrap or none"),
        ("SANDBOX_MEMORY_MB", "0", "SANDBOX_MEMORY_MB must be positive"),
        ("SANDBOX_OUTPUT_BYTES", "-1", "SANDBOX_OUTPUT_BYTES must be positive"),
        ("SANDBOX_CONCURRENCY", "0", "SANDBOX_CONCURRENCY must be positive"),
        ("FILE_THROTTLE_RATE", "lots", "FILE_THROTTLE_RATE must be <count>/<second"),
        ("IMPORT_THROTTLE_RATE", "0/hour", "IMPORT_THROTTLE_RATE must be <count>/<second"),
        ("NUM_PROXIES", "-1", "NUM_PROXIES must be 0 or more"),
        ("MAX_PERSON_SOCKETS_PER_USER", "0", "MAX_PERSON_SOCKETS_PER_USER must be positive"),
        ("THUMB_DECODE_MAX_BYTES", "0", "THUMB_DECODE_MAX_BYTES must be positive"),
        ("IMPORT_MAX_JSON_VALUES", "0", "IMPORT_MAX_JSON_VALUES must be positive"),
        ("FILE_READ_WALL_SEC", "2", "FILE_READ_WALL_SEC (2.0) must be at least FILE_READ_CPU_SEC"),
    ],
)
def test_a_bad_value_is_refused_with_its_name(variable, value, message):
    started = start_django(**{variable: value})
    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr and message in started.stderr


def test_the_postgres_backend_insists_on_a_postgresql_database():
    started = start_django(
        JARVIS_SESSION__PERSISTENCE_BACKEND="postgres",
        DATABASE_URL=f"sqlite:///{REPO / 'var' / 'unused.sqlite3'}",
    )
    assert started.returncode != 0
    assert "needs a PostgreSQL DATABASE_URL" in started.stderr


def test_postgres_dsn_is_an_alias_of_database_url():
    started = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; "
            "print(settings.DATABASES['default']['ENGINE'], settings.DATABASES['default']['NAME'])",
        ],
        cwd=REPO,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(REPO / "var"),
            "DJANGO_SETTINGS_MODULE": "jarvis_site.settings",
            "POSTGRES_DSN": "postgres://someone@127.0.0.1:5432/jarvis",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.stdout.split() == ["django.db.backends.postgresql", "jarvis"], started.stderr


def test_the_defaults_need_no_environment_at_all():
    started = start_django()
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == "configured"


def setting_value(name: str, **env) -> str:
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(REPO / "var"), **env}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; "
            f"print(settings.{name})",
        ],
        cwd=REPO,
        env={"DJANGO_SETTINGS_MODULE": "jarvis_site.settings", **environment},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


def test_delivery_back_off_has_channel_neutral_names_and_still_reads_the_old_ones():
    """Every channel's back-off is NOTIFY_RETRY_*; a deployment that set the names of the
    webhook-only days (NOTIFY_WEBHOOK_RETRY_*) keeps its values, and the new name wins."""
    assert setting_value("NOTIFY_RETRY_BASE_SEC", NOTIFY_RETRY_BASE_SEC="7") == "7.0"
    assert setting_value("NOTIFY_RETRY_BASE_SEC", NOTIFY_WEBHOOK_RETRY_BASE_SEC="9") == "9.0"
    both = {"NOTIFY_RETRY_MAX_SEC": "60", "NOTIFY_WEBHOOK_RETRY_MAX_SEC": "90"}
    assert setting_value("NOTIFY_RETRY_MAX_SEC", **both) == "60.0"
    assert setting_value("NOTIFY_TIMEOUT_SEC") == "10.0"


def test_an_s3_blob_url_names_the_bucket_and_the_prefix():
    """docs/design.md §23: s3://<bucket>/<prefix> is an S3Storage on that bucket, keys under
    the prefix, private, read back by the app itself (no signed URLs)."""
    blobs = "STORAGES['blobs']"
    url = {"BLOB_STORAGE_URL": "s3://jarvis-blobs/prod/files/"}
    assert setting_value(f"{blobs}['BACKEND']", **url) == "storages.backends.s3.S3Storage"
    options = f"{blobs}['OPTIONS']"
    assert setting_value(f"{options}['bucket_name']", **url) == "jarvis-blobs"
    assert setting_value(f"{options}['location']", **url) == "prod/files"
    assert setting_value(f"{options}['default_acl']", **url) == "private"
    assert setting_value(f"{options}['querystring_auth']", **url) == "False"
    endpoint = {**url, "AWS_S3_ENDPOINT_URL": "http://127.0.0.1:9000"}
    assert setting_value("AWS_S3_ENDPOINT_URL", **endpoint) == "http://127.0.0.1:9000"
    assert setting_value(f"{blobs}['BACKEND']").endswith("FileSystemStorage")  # unset: a dir


def test_the_store_pool_is_smaller_on_sqlite_which_lets_one_writer_in_at_a_time():
    sqlite = f"sqlite:///{REPO / 'var' / 'unused.sqlite3'}"
    postgres = "postgres://someone@127.0.0.1:5432/jarvis"
    assert setting_value("STORE_THREADS", DATABASE_URL=sqlite) == "3"
    assert setting_value("STORE_THREADS", DATABASE_URL=postgres) == "8"
    assert setting_value("STORE_THREADS", DATABASE_URL=sqlite, STORE_THREADS="5") == "5"
