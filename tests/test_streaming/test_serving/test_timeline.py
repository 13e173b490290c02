"""The group timeline (`streaming.serving.timeline`): bounded, newest first, fed by the sink once
per batch, served at ``GET /groups/{id}/timeline``."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from state import events as ev
from streaming.pipeline.sinks import MirrorSink
from streaming.serving.api import MirrorHTTPServer
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.serving.timeline import COMPRESS_FROM, RETIRED_KEPT, Timeline
from tests.support.http import request


def _e(gid: str, i: int, type_: str = "member_joined") -> dict[str, Any]:
    return {"type": type_, "group_id": gid, "source_partition": 0, "source_offset": i,
            "source_timestamp_ms": 1_000 + i, "member_id": f"m-{i}-" + "x" * 40}  # fmt: skip


def test_bounded_per_group_newest_first() -> None:
    t = Timeline(limit=5)
    t.add(_e("g", i) for i in range(3))
    t.add([_e("g", 3), _e("h", 0), _e("g", 4, "offsets_committed"), _e("", 9)])
    t.add(_e("g", i) for i in range(4, 9))
    got = t.events("g")
    assert got is not None and [e["source_offset"] for e in got] == [8, 7, 6, 5, 4]
    assert "group_id" not in got[0] and got[0]["type"] == "member_joined"
    assert [e["source_offset"] for e in t.events("g", limit=2) or ()] == [8, 7]
    assert [e["source_offset"] for e in t.events("h") or ()] == [0]
    assert t.events("nobody") is None and len(t) == 2
    assert t.stored_bytes() < 5 * len(json.dumps(_e("g", 0)))  # compressed: member ids repeat


def test_off_and_deleted_groups() -> None:
    off = Timeline(limit=0)
    off.add([_e("g", 0)])
    assert off.events("g") is None
    t = Timeline(limit=3)
    t.add([_e("g", 0), _e("g", 1, "group_deleted")])
    t.retire(["g", "unknown"])
    assert len(t) == 0 and [e["type"] for e in t.events("g") or ()] == ["group_deleted", "member_joined"]
    t.add([_e("g", 2, "group_created")])  # the id in use again: its history continues
    assert [e["type"] for e in t.events("g") or ()] == ["group_created", "group_deleted", "member_joined"]
    t.retire(f"r{i}" for i in range(RETIRED_KEPT + 5))  # nothing to retire: no growth
    t.add(_e(f"r{i}", 0) for i in range(RETIRED_KEPT + 5))
    t.retire(f"r{i}" for i in range(RETIRED_KEPT + 5))
    assert t.events("r0") is None and t.events(f"r{RETIRED_KEPT + 4}") is not None


def test_small_timelines_stay_plain() -> None:
    t = Timeline(limit=50)
    t.add([{"type": "state_changed", "group_id": "g", "after": "Stable"}])
    assert t.stored_bytes() < COMPRESS_FROM


class _Row:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def test_the_sink_feeds_it_once_per_batch(tmp_path: Any) -> None:
    from streaming.settings import load_settings

    store = SnapshotStore()
    sink = MirrorSink.__new__(MirrorSink)  # no Spark: only `_apply` and the driver events
    sink.settings = load_settings(bootstrap_servers="localhost:9092")
    sink.store, sink.status, sink.events_dir, sink.markers, sink.on_batch = (
        store,
        MirrorStatus(),
        None,
        {},
        [],
    )
    joined = ev.MemberJoined("g", 0, 1, 5, member_id="m").to_json()
    committed = ev.OffsetsCommitted("g", 0, 2, 6, count=3).to_json()
    rows = [
        _Row(kind="event", body=json.dumps(e), summary=e["type"], group_id="g") for e in (joined, committed)
    ]
    sink._apply(7, rows)
    sink._apply(7, rows)  # the same batch again (a restart from the checkpoint): added once
    sink.write_driver_events([{"type": "group_status_changed", "group_id": "g", "after": "ERR"}], 9, "health")
    assert [e["type"] for e in store.timeline.events("g") or ()] == ["group_status_changed", "member_joined"]


@pytest.fixture(scope="module")
def server() -> Iterator[MirrorHTTPServer]:
    store = SnapshotStore()
    for gid in ("g", "team/orders/timeline"):
        store.timeline.add(_e(gid, i) for i in range(4))
    srv = MirrorHTTPServer(("127.0.0.1", 0), store).start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("gid", ["g", "team/orders/timeline"])
def test_the_route(server: MirrorHTTPServer, gid: str) -> None:
    quoted = urllib.parse.quote(gid, safe="")
    status, _, body = request(f"{server.url}/groups/{quoted}/timeline")
    got = json.loads(body)
    assert status == 200 and got["group_id"] == gid and got["kept"] == 50
    assert [e["source_offset"] for e in got["events"]] == [3, 2, 1, 0]
    status, _, body = request(f"{server.url}/groups/{quoted}/timeline?limit=1")
    assert status == 200 and len(json.loads(body)["events"]) == 1
    status, _, body = request(f"{server.url}/groups/nobody/timeline")
    assert status == 404 and json.loads(body)["error"] == "group_not_found"
    # an id ending in an encoded "/timeline" is a group (here: not mirrored, so not found)
    status, _, body = request(f"{server.url}/groups/{urllib.parse.quote('x/timeline', safe='')}")
    assert status == 404 and json.loads(body)["group_id"] == "x/timeline"
