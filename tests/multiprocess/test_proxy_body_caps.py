"""The proxy's body caps (deploy/nginx.conf.template, as `make cluster` fills it in): the same
caps as the workers', and the larger one of an upload only for a signed-in client
(docs/design.md §27)."""

import json

import pytest

from tests.builders import token_of
from tests.conftest import requires_postgres
from tests.multiprocess.cluster import cluster, requires_nginx
from tests.multiprocess.redis_layer import requires_redis
from tests.multiprocess.test_request_bodies import MiB, filler, request_head, stream

pytestmark = [
    pytest.mark.django_db(transaction=True),
    requires_postgres,
    requires_redis,
    requires_nginx,
]


def test_the_proxy_takes_an_upload_only_from_a_signed_in_client(alice, tmp_path):
    token = token_of(alice)
    size = 3 * MiB  # over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB), under the import's cap
    form = {"Content-Type": "multipart/form-data; boundary=b", "Content-Length": str(size)}
    with cluster(tmp_path, workers=1, IMPORT_MAX_BYTES=4 * MiB) as running:
        # Any other path: refused from the Content-Length.
        status, _, _, sent = stream(
            running.proxy,
            request_head("POST", "/api/sessions/", {**form, "Authorization": f"Token {token}"}),
            filler(size),
        )
        assert status == 413 and sent < size
        # The import, without credentials or with a token that is no one's: 401, before the
        # body is read.
        for headers in (form, {**form, "Authorization": "Token not-a-token"}):
            status, _, _, sent = stream(
                running.proxy, request_head("POST", "/api/import/", headers), filler(size)
            )
            assert status == 401 and sent < size
        # Signed in: the whole body reaches the import, which answers for itself.
        status, _, body, sent = stream(
            running.proxy,
            request_head("POST", "/api/import/", {**form, "Authorization": f"Token {token}"}),
            filler(size),
        )
        assert sent == size
        assert status == 400 and json.loads(body)["code"] != "too_large"
        # Over the import's own cap: refused from the Content-Length, signed in or not.
        over = 5 * MiB
        status, _, _, sent = stream(
            running.proxy,
            request_head(
                "POST",
                "/api/import/",
                {**form, "Content-Length": str(over), "Authorization": f"Token {token}"},
            ),
            filler(over),
        )
        assert status == 413 and sent < over
