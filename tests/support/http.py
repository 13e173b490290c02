"""HTTP helpers of the API and live suites: a JSON GET that returns (status, body), a raw request, and the
state bytes of a small group to fill a store with."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from lab.records import HOUR
from lab.synthetic import empty_classic, stable_classic
from state import codec


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def state_bytes(group_id: str, state: str = "Stable") -> bytes:
    """A real group's state bytes, as the query's sink hands them to the store."""
    g = empty_classic(group_id, 1, HOUR) if state == "Empty" else stable_classic(group_id, 1)
    assert g.state == state
    return codec.encode(g)


def request(
    url: str, method: str = "GET", headers: dict[str, str] | None = None, context: Any = None
) -> tuple[int, Any, bytes]:
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()
