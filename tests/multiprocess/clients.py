"""Clients of the real servers in these tests: HTTP with a token, WebSockets, frames."""

import asyncio
import json
import urllib.error
import urllib.request

from websockets.asyncio.client import connect

from tests.helpers import GUARD_SEC

# Only a guard against hanging: a frame that is coming arrives long before it.
RECEIVE_TIMEOUT = GUARD_SEC


def http(method, url, token, body=None):
    """One API call with a token; returns (status, JSON body)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Token {token}", "Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, method=method, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=RECEIVE_TIMEOUT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def ws_connect(base, session_id, token, query="", origin=None):
    """A WebSocket to a session, sent from the server's own page unless `origin` says else."""
    host = base.removeprefix("http://")
    return connect(
        f"ws://{host}/ws/sessions/{session_id}/{query}",
        origin=origin or base,
        additional_headers={"Authorization": f"Token {token}"},
        open_timeout=RECEIVE_TIMEOUT,
    )


async def receive(ws, timeout=RECEIVE_TIMEOUT):
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def until_agent_end(ws, timeout=RECEIVE_TIMEOUT):
    """Every event up to and including the next `agent_end`."""
    events = []
    while not events or events[-1]["type"] != "agent_end":
        events.append(await receive(ws, timeout))
        assert events[-1]["type"] != "error", events[-1]
    return events
