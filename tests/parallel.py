"""What each pytest-xdist worker keeps to itself, so that workers never meet: its test database
(pytest-django suffixes the name with the worker id), its Redis database, its ports.

A worker is `gw0`, `gw1`, ... (PYTEST_XDIST_WORKER); a run without xdist is worker 0.
"""

from __future__ import annotations

import os
import random
import socket
import urllib.parse

# Servers listen below Linux's ephemeral range (32768-60999): a client socket the kernel
# numbers never takes a port a test picked, and each worker draws from a block of its own,
# so two workers never pick the same port between the moment one is found free and the
# moment its server binds it.
FIRST_PORT = 10_000
PORTS_PER_WORKER = 2_000
LAST_PORT = 32_767
REDIS_DATABASES = 16  # Redis' default `databases`
# The Fetch standard's "bad ports" a browser refuses to open (net::ERR_UNSAFE_PORT) that fall
# in the range above: a browser test whose server drew one failed before its first page.
BROWSER_BAD_PORTS = frozenset({10080})


def worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker.removeprefix("gw") or 0)


def _port_block(index: int) -> range:
    blocks = (LAST_PORT + 1 - FIRST_PORT) // PORTS_PER_WORKER
    start = FIRST_PORT + (index % blocks) * PORTS_PER_WORKER
    return range(start, start + PORTS_PER_WORKER)


_block = _port_block(worker_index())
# A random start: two suites run side by side (two worktrees) rarely walk the same ports.
_cursor = random.randrange(len(_block))


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int = 1) -> int:
    """The first of `count` consecutive free ports from this worker's block."""
    global _cursor
    for _ in range(len(_block)):
        first = _block.start + _cursor % len(_block)
        _cursor = (_cursor + count) % len(_block)
        ports = range(first, first + count)
        if (
            ports.stop <= _block.stop
            and not BROWSER_BAD_PORTS.intersection(ports)
            and all(_is_free(port) for port in ports)
        ):
            return first
    raise RuntimeError(f"no {count} consecutive free ports in {_block}")


def redis_url_of_worker(base_url: str) -> str:
    """`base_url` with its database number moved up by the worker's index: worker 0 uses the
    database it names, worker 1 the next one, and so on. The channel layer's groups and
    `flush()` are per database, so one worker's sockets never receive another's events."""
    parts = urllib.parse.urlsplit(base_url)
    base = int(parts.path.strip("/") or 0)
    number = base + worker_index()
    if number >= REDIS_DATABASES:
        raise RuntimeError(
            f"TEST_REDIS_URL={base_url} leaves no Redis database for xdist worker "
            f"{worker_index()} (database {number}): name a lower database or run fewer workers"
        )
    return urllib.parse.urlunsplit(parts._replace(path=f"/{number}"))
