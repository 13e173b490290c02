"""The HTTP API over the driver's snapshot store (no Spark needed: the store is filled directly)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections import namedtuple
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from lab.records import Log
from lab.synthetic import RENDERER
from state import codec
from state.replay import fold
from state.snapshot import summary
from streaming.serving.api import ClusterView, MirrorHTTPServer
from streaming.serving.offset_history import OffsetHistory
from streaming.serving.reset_plan import offsets_route
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


# -- several clusters behind one server ----------------------------------------------------------
def _fleet_view(name: str, groups: list[str], *, ready: bool, source_error: str | None = None) -> Any:
    from streaming.serving.api import ClusterView
    from streaming.serving.status import MirrorStatus

    store = SnapshotStore(renderer=RENDERER)
    store.apply(
        0, [(g, state_bytes(g), {"group_id": g, "kind": "classic", "state": "Stable"}) for g in groups]
    )
    store.add_errors([{"status": "error", "source_partition": 1, "source_offset": len(name)}])
    store.timeline.add([{"type": "group_status_changed", "group_id": g, "cluster": name} for g in groups])
    status = MirrorStatus()
    status.set_targets({}, {0: 10})
    if ready:
        status.advance({0: 10})
    status.source_checked(source_error)

    def lag_route(path: str) -> tuple[int, Any] | None:
        # Burrow's own shape: this view answers for its cluster only
        parts = path.strip("/").split("/")
        if parts[:2] == ["v3", "kafka"]:
            if len(parts) == 2:
                return 200, {"clusters": [name]}
            return (200, {"cluster": name}) if parts[2] == name else (404, {"message": "cluster not found"})
        return 200, {"group_id": urllib.parse.unquote(path.split("/")[2]), "cluster": name}

    return ClusterView(store, status, lag_route)


@pytest.fixture
def fleet() -> Iterator[str]:
    srv = MirrorHTTPServer(
        ("127.0.0.1", 0),
        SnapshotStore(),
        clusters={
            "eu": _fleet_view("eu", ["orders", "eu-only"], ready=True),
            "us": _fleet_view("us", ["orders", "us/only"], ready=True),
            "ap": _fleet_view("ap", ["ap-only"], ready=False, source_error="TimeoutException: no answer"),
        },
    ).start()
    yield srv.url
    srv.stop()


def _json_of(url: str) -> tuple[int, Any]:
    status, _, body = _get(url)
    return status, json.loads(body)


def test_the_groups_of_every_cluster_each_with_its_cluster(fleet: str) -> None:
    status, body = _json_of(f"{fleet}/groups")
    assert status == 200 and body["count"] == 5
    assert [(r["cluster"], r["group_id"]) for r in body["groups"]] == [
        ("eu", "eu-only"), ("eu", "orders"), ("us", "orders"), ("us", "us/only"), ("ap", "ap-only"),
    ]  # fmt: skip
    status, body = _json_of(f"{fleet}/groups?cluster=us&cluster=ap")
    assert {r["cluster"] for r in body["groups"]} == {"us", "ap"}
    status, body = _json_of(f"{fleet}/groups?cluster=nowhere")
    assert status == 404 and body["error"] == "cluster_not_found" and body["clusters"] == ["eu", "us", "ap"]


def test_a_group_id_two_clusters_hold_is_asked_with_its_cluster(fleet: str) -> None:
    status, body = _json_of(f"{fleet}/groups/orders")
    assert status == 409 and body["error"] == "group_in_several_clusters" and body["clusters"] == ["eu", "us"]
    for cluster in ("eu", "us"):
        status, body = _json_of(f"{fleet}/groups/orders?cluster={cluster}")
        assert status == 200 and body["cluster"] == cluster and body["group_id"] == "orders"
        status, body = _json_of(f"{fleet}/groups/orders/lag?cluster={cluster}")
        assert status == 200 and body["cluster"] == cluster
        status, body = _json_of(f"{fleet}/groups/orders/timeline?cluster={cluster}")
        assert status == 200 and [e["cluster"] for e in body["events"]] == [cluster]
    # an id one cluster holds needs no cluster; "/" encoded stays in the id
    status, body = _json_of(f"{fleet}/groups/{urllib.parse.quote('us/only', safe='')}")
    assert status == 200 and body["cluster"] == "us"
    assert _json_of(f"{fleet}/groups/orders?cluster=ap")[0] == 404
    assert _json_of(f"{fleet}/groups/nobody")[0] == 404


def test_burrows_paths_list_every_cluster_and_route_each(fleet: str) -> None:
    assert _json_of(f"{fleet}/v3/kafka")[1]["clusters"] == ["eu", "us", "ap"]
    assert _json_of(f"{fleet}/v3/kafka/us") == (200, {"cluster": "us"})
    assert _json_of(f"{fleet}/v3/kafka/ap/consumer") == (200, {"cluster": "ap"})
    assert _json_of(f"{fleet}/v3/kafka/mars")[0] == 404


def test_ready_with_one_cluster_down_and_each_cluster_alone(fleet: str) -> None:
    status, body = _json_of(f"{fleet}/ready")
    # two clusters caught up, the third does not answer: the pod stays in its Service
    assert status == 200 and body["ready"] is True
    assert body["clusters"]["ap"]["reason"].startswith("source unavailable: TimeoutException")
    assert _json_of(f"{fleet}/ready?cluster=ap")[0] == 503
    status, body = _json_of(f"{fleet}/ready?cluster=eu")
    assert status == 200 and body["reason"] is None and "clusters" not in body
    errors = _json_of(f"{fleet}/errors")[1]["errors"]
    assert sorted(e["cluster"] for e in errors) == ["ap", "eu", "us"]


def test_ready_of_a_fleet() -> None:
    """Ready once one cluster is ready and none is catching up; down, refused or waiting for its
    topic: reported, not gating."""
    from streaming.serving.api import fleet_ready_body
    from streaming.serving.status import MirrorStatus

    def status(kind: str) -> MirrorStatus:
        s = MirrorStatus()
        if kind != "waiting":
            s.set_targets({}, {0: 5})
        if kind in ("ready", "down"):
            s.advance({0: 5})
        if kind in ("down", "resuming"):
            s.source_checked("TimeoutException")
        if kind == "resuming":
            s.source_checked(None)
        if kind == "waiting":
            s.waiting("waiting for __consumer_offsets")
        return s

    cases = [
        (["ready", "ready"], True, None),
        (["ready", "down"], True, None),
        (["ready", "waiting"], True, None),
        (["ready", "catching_up"], False, "catching up: c1"),
        (["ready", "resuming"], True, None),
        (["resuming"], False, "no cluster is ready"),
        (["down", "down"], False, "no cluster is ready"),
        (["waiting"], False, "no cluster is ready"),
    ]
    for kinds, ok, reason in cases:
        got, body = fleet_ready_body({f"c{i}": status(k) for i, k in enumerate(kinds)})
        assert (got, body["reason"]) == (ok, reason), kinds


# -- GET /groups/{id}/offsets?at= (issue 38) ------------------------------------------------------
def _history_view(gid: str, steps: list[int]) -> Any:
    """A cluster view whose offsets route reads a real offset history, fed the sink's rows of a
    group folded from records committing ``10 * k`` on ("t", 0) at each of ``steps``."""
    row = namedtuple("row", "group_id kind key body summary blob")
    log = Log()
    clock = {"ms": log.now_ms}
    history = OffsetHistory([(3_600_000, 0)], 3_600_000, None, clock_ms=lambda: clock["ms"])
    g = None
    store = SnapshotStore(renderer=RENDERER)
    for k in range(3):
        log.commit(gid, "t", 0, 10 * k)
        recs, log.records = log.records, []
        g = fold(g.copy() if g is not None else None, recs).group
        assert g is not None
        clock["ms"] = log.now_ms
        steps.append(log.now_ms)
        history.on_batch(k, [row(gid, "snapshot", None, None, json.dumps(summary(g)), codec.encode(g))])
        log.tick(30_000)
    clock["ms"] = log.now_ms
    store.apply(0, [(gid, state_bytes(gid), {"group_id": gid, "kind": "simple", "state": "Empty"})])

    def hook(group_id: str, at: str | None) -> tuple[int, Any]:
        return offsets_route(history, group_id, at, clock["ms"], bootstrap="b:9092")

    return ClusterView(store, offsets_at=hook)


def test_offsets_at_answers_through_the_api_per_cluster() -> None:
    gid = "tenant/grüppe <b>"
    steps: list[int] = []
    view = _history_view(gid, steps)
    srv = MirrorHTTPServer(
        ("127.0.0.1", 0),
        SnapshotStore(),
        clusters={"eu": view, "us": _history_view(gid, []), "off": ClusterView(SnapshotStore())},
    ).start()
    try:
        path = f"{srv.url}/groups/{urllib.parse.quote(gid, safe='')}/offsets"
        status, body = _json_of(f"{path}?cluster=eu&at={steps[1] + 1}")
        assert status == 200 and body["group_id"] == gid and body["kind"] == "simple"
        assert [(x["topic"], x["partition"], x["offset"], x["offset_now"]) for x in body["partitions"]] == [
            ("t", 0, 10, 20)
        ]
        assert "b:9092" in json.dumps(body["plan"])
        # in two clusters: which one (409); a moment with no time zone, or none: 400 saying so
        status, body = _json_of(f"{path}?at={steps[1]}")
        assert status == 409 and body["clusters"] == ["eu", "us"]
        assert _json_of(f"{path}?cluster=eu&at=2026-11-18T11:06:40")[1]["error"] == "at_no_time_zone"
        assert _json_of(f"{path}?cluster=eu")[1]["error"] == "at_missing"
        # before the history began recording: a 4xx naming the horizon
        status, body = _json_of(f"{path}?cluster=eu&at={steps[0] - 1}")
        assert (status, body["error"]) == (410, "before_horizon") and body["horizon_ms"] == steps[0]
        # a cluster without the history: 404 naming it; an id ending in "%2Foffsets" is a group
        status, body = _json_of(f"{path}?cluster=off&at={steps[1]}")
        assert (status, body["error"]) == (404, "offset_history_off")
        status, _ = _json_of(f"{srv.url}/groups/{urllib.parse.quote('x/offsets', safe='')}?cluster=eu")
        assert status == 404
    finally:
        srv.stop()
