"""The HTTP API over the driver's snapshot store (no Spark needed: the store is filled directly)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from lab.synthetic import RENDERER
from streaming.serving.api import MirrorHTTPServer
from streaming.serving.status import Readiness
from streaming.serving.store import SnapshotStore
from tests.support.http import state_bytes


def _get(url: str, method: str = "GET") -> tuple[int, Any, bytes]:
    """(status, headers -- case-insensitive, as HTTP's are --, body)."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


@pytest.fixture
def server() -> Iterator[tuple[MirrorHTTPServer, SnapshotStore, dict[str, Any]]]:
    store = SnapshotStore(renderer=RENDERER)
    health = {"ok": True}
    srv = MirrorHTTPServer(
        ("127.0.0.1", 0),
        store,
        metrics=lambda: (b"# metrics\n", "text/plain; version=0.0.4"),
        health=lambda: (health["ok"], {} if health["ok"] else {"error": "boom"}),
    ).start()
    yield srv, store, health
    srv.stop()


def test_groups_listing_detail_and_percent_encoded_ids(server: Any) -> None:
    srv, store, _ = server
    weird = "team/ü groups?#1"
    store.apply(
        0,
        [
            ("a", state_bytes("a"), {"group_id": "a", "kind": "classic", "state": "Stable"}),
            (weird, state_bytes(weird, "Empty"), {"group_id": weird, "kind": "consumer", "state": "Empty"}),
        ],
    )
    status, headers, body = _get(f"{srv.url}/groups")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert [g["group_id"] for g in json.loads(body)["groups"]] == ["a", weird]
    status, _, body = _get(f"{srv.url}/groups?kind=consumer&state=Empty")
    assert [g["group_id"] for g in json.loads(body)["groups"]] == [weird]
    status, _, body = _get(f"{srv.url}/groups/{urllib.parse.quote(weird, safe='')}")
    detail = json.loads(body)
    assert status == 200 and detail["group_id"] == weird and detail["state"] == "Empty"
    expires_at_ms = detail["offsets"][0]["expires_at_ms"]
    assert detail["offsets"][0]["expires_at"] == datetime.fromtimestamp(expires_at_ms / 1000, UTC).isoformat(
        timespec="milliseconds"
    ).replace("+00:00", "Z")
    # deletion removes the group
    store.apply(1, [("a", None, None)])
    status, _, body = _get(f"{srv.url}/groups/a")
    assert status == 404 and json.loads(body) == {"error": "group_not_found", "group_id": "a"}


def test_ready_health_errors_metrics_and_unknown_routes(server: Any) -> None:
    srv, store, health = server
    mirror_status = srv.status
    mirror_status.set_targets({}, {0: 10, 1: 5})
    status, _, body = _get(f"{srv.url}/ready")
    assert status == 503 and json.loads(body)["records_behind"] == 15
    mirror_status.advance({0: 10, 1: 5})
    status, _, body = _get(f"{srv.url}/ready")
    assert status == 200 and json.loads(body)["ready"] is True
    assert _get(f"{srv.url}/healthz")[0] == 200
    health["ok"] = False
    status, _, body = _get(f"{srv.url}/healthz")
    assert status == 500 and json.loads(body)["error"] == "boom"
    store.add_errors([{"source_partition": 3, "source_offset": 7, "error_reason": "truncated"}])
    assert json.loads(_get(f"{srv.url}/errors")[2])["errors"][0]["source_offset"] == 7
    status, headers, body = _get(f"{srv.url}/metrics")
    assert status == 200 and body == b"# metrics\n" and headers["Content-Type"].startswith("text/plain")
    assert _get(f"{srv.url}/nothing-here")[0] == 404
    status, _, body = _get(f"{srv.url}/groups", method="HEAD")
    assert status == 200 and body == b""


def test_readiness_progress_counts_positions_not_records() -> None:
    """Compaction gaps and transaction markers: the target is a log position, so a partition whose
    last positions hold no visible record still reaches it when the reader's position does."""
    r = Readiness()
    r.starts, r.targets = {0: 100, 1: 0}, {0: 200, 1: 50}
    r.update({0: 150})
    assert r.progress() == pytest.approx(50 / 150) and not r.ready
    r.update({0: 200, 1: 50})  # e.g. offset 199 was a COMMIT marker: no record, but position 200
    assert r.ready and r.progress() == 1.0 and sum(r.behind().values()) == 0
