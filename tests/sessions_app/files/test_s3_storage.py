"""docs/design.md §23: the blob store on an S3-compatible bucket (BLOB_STORAGE_URL=s3://…).

The machine has no S3 service of its own, so the tests start moto's S3 server on 127.0.0.1:
a real HTTP server that the real boto3 client (through django-storages) talks to, as it
would to AWS or MinIO. Every request then goes through the HTTP API, and what the bucket
holds is read back with a boto3 client of the test's own.
"""

import io
import subprocess
import sys
import uuid

import boto3
import pytest
from django.core.management import call_command
from moto.server import ThreadedMotoServer
from PIL import Image

from sessions_app.models import Blob
from tests.helpers import REPO
from tests.multiprocess.servers import free_port
from tests.sessions_app.files.helpers import pdf_bytes, png_bytes, upload

pytestmark = pytest.mark.django_db

REGION = "us-east-1"
KEYS = {"AWS_ACCESS_KEY_ID": "jarvis-test", "AWS_SECRET_ACCESS_KEY": "jarvis-test-secret"}
PREFIX = "jarvis/blobs"


@pytest.fixture(scope="module")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()  # returns once the server is listening
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def s3_client(endpoint: str):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
    )


@pytest.fixture
def bucket(s3_endpoint) -> str:
    """A fresh, empty bucket of the test's own."""
    name = f"blobs-{uuid.uuid4().hex[:12]}"
    s3_client(s3_endpoint).create_bucket(Bucket=name)
    return name


def stored_objects(endpoint: str, bucket: str) -> dict[str, bytes]:
    client = s3_client(endpoint)
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {
        item["Key"]: client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        for item in listed
    }


@pytest.fixture
def s3_blobs(settings, s3_endpoint, bucket):
    """STORAGES["blobs"] on the bucket, as settings.py builds it for s3://<bucket>/<prefix>."""
    settings.AWS_S3_ENDPOINT_URL = s3_endpoint
    settings.AWS_S3_REGION_NAME = REGION
    settings.AWS_ACCESS_KEY_ID = KEYS["AWS_ACCESS_KEY_ID"]
    settings.AWS_SECRET_ACCESS_KEY = KEYS["AWS_SECRET_ACCESS_KEY"]
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "location": PREFIX,
                "default_acl": "private",
                "querystring_auth": False,
                "file_overwrite": True,
                "max_memory_size": 4 * 1024 * 1024,
            },
        },
    }
    return bucket


def key(sha256: str) -> str:
    return f"{PREFIX}/{sha256[:2]}/{sha256[2:4]}/{sha256}"


def test_files_round_trip_through_the_bucket(api, bob_api, s3_blobs, s3_endpoint):
    api.post("/api/sessions/", {"id": "pics"}, format="json")
    png = png_bytes(1000, 500)
    first = upload(api, "pics", "screen.png", png)
    again = upload(api, "pics", "copy.png", png)
    assert first.status_code == 201, first.content
    assert again.status_code == 201, again.content
    file_id = first.json()["id"]
    assert again.json()["id"] == file_id
    assert stored_objects(s3_endpoint, s3_blobs) == {key(file_id): png}  # one object

    response = api.get(f"/api/sessions/pics/files/{file_id}/")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == png
    assert response["Content-Type"] == "image/png"
    thumb = api.get(f"/api/sessions/pics/files/{file_id}/thumb/")
    assert thumb.status_code == 200
    with Image.open(io.BytesIO(thumb.content)) as image:
        assert image.size == (256, 128)

    missing = bob_api.get(f"/api/sessions/no-such/files/{file_id}/")
    for path in (f"files/{file_id}/", f"files/{file_id}/thumb/"):
        other = bob_api.get(f"/api/sessions/pics/{path}")
        assert other.status_code == 404
        assert other.json() == missing.json()


def test_deleting_the_session_then_sweeping_empties_the_bucket(api, s3_blobs, s3_endpoint):
    api.post("/api/sessions/", {"id": "gone"}, format="json")
    api.post("/api/sessions/", {"id": "stays"}, format="json")
    kept = upload(api, "stays", "kept.png", png_bytes(12, 12)).json()["id"]
    png = upload(api, "gone", "a.png", png_bytes(10, 10)).json()["id"]
    pdf = upload(api, "gone", "report.pdf", pdf_bytes("Quarterly zebra count")).json()["id"]
    objects = stored_objects(s3_endpoint, s3_blobs)
    # A PDF's text sits beside its bytes.
    assert sorted(objects) == sorted([key(kept), key(png), key(pdf), key(pdf) + ".txt"])
    assert b"zebra" in objects[key(pdf) + ".txt"]

    assert api.delete("/api/sessions/gone/").json() == {"deleted": True, "exports": []}
    out = io.StringIO()
    call_command("blobs_sweep", stdout=out)

    assert "2 unlinked" in out.getvalue()
    assert list(stored_objects(s3_endpoint, s3_blobs)) == [key(kept)]
    assert list(Blob.objects.values_list("sha256", flat=True)) == [kept]


def test_settings_build_the_bucket_storage_from_the_environment(s3_endpoint, bucket):
    """BLOB_STORAGE_URL=s3://<bucket>/<prefix> and django-storages' variables are all a
    deployment sets: the storage settings.py builds from them writes to the bucket."""
    script = (
        "import django; django.setup(); "
        "from django.core.files.base import ContentFile; "
        "from django.core.files.storage import storages; "
        "blobs = storages['blobs']; "
        "print(blobs.save('ab/cd/abcd', ContentFile(b'bytes'))); "
        "print(blobs.exists('ab/cd/abcd'), blobs.size('ab/cd/abcd'))"
    )
    started = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(REPO / "var"),
            "DJANGO_SETTINGS_MODULE": "jarvis_site.settings",
            "BLOB_STORAGE_URL": f"s3://{bucket}/{PREFIX}/",
            "AWS_S3_ENDPOINT_URL": s3_endpoint,
            "AWS_S3_REGION_NAME": REGION,
            **KEYS,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ["ab/cd/abcd", "True", "5"]
    assert stored_objects(s3_endpoint, bucket) == {f"{PREFIX}/ab/cd/abcd": b"bytes"}
