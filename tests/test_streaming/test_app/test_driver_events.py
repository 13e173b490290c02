"""The driver's own change events (`streaming.app.driver_events.DriverEvents`) through a real sink
(`streaming.pipeline.sinks.MirrorSink` writing JSON-lines files): written at once when a sink is
attached; before it, kept for the first sink when asked to wait (the start-up drift checks) and
dropped otherwise; a restarted query's new sink takes over."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from lab.synthetic import RENDERER, settings
from streaming.app.driver_events import DriverEvents
from streaming.pipeline.sinks import DRIVER_EVENTS, HEALTH_EVENTS, MirrorSink
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore


def _sink(folder: Path) -> MirrorSink:
    s = settings(events_path=folder)
    store = SnapshotStore(cache_bytes=1 << 20, timeline_events=50, renderer=RENDERER)
    return MirrorSink(s, store, MirrorStatus(), spark=None)  # no output topic: Spark is never asked


def _event(group_id: str, reason: str) -> dict[str, Any]:
    return {"type": "drift_suspected", "group_id": group_id, "reason": reason, "at_ms": 1}


def _written(folder: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        f.name: [json.loads(line) for line in f.read_text().splitlines()]
        for f in sorted(folder.glob("*.jsonl"))
    }


def test_events_before_a_sink_wait_for_it_only_when_asked(tmp_path: Path) -> None:
    events = DriverEvents()
    events.write([_event("g/ü", "log_start")], 1000, wait=True)
    events.write([_event("h", "dropped")], 1001)  # no sink, not waiting: counted where it is made
    sink = _sink(tmp_path / "a")
    events.attach(sink)
    assert _written(tmp_path / "a") == {f"{DRIVER_EVENTS}-0000000001000.jsonl": [_event("g/ü", "log_start")]}
    assert [e["reason"] for e in sink.store.timeline.events("g/ü") or []] == ["log_start"]


def test_with_a_sink_events_are_written_now_under_their_name(tmp_path: Path) -> None:
    events = DriverEvents()
    events.attach(_sink(tmp_path / "a"))
    events.write([_event("g", "x"), _event("h", "y")], 2000, HEALTH_EVENTS)
    events.write([], 2001)  # nothing to write: no file
    assert list(_written(tmp_path / "a")) == [f"{HEALTH_EVENTS}-0000000002000.jsonl"]
    assert [e["group_id"] for e in _written(tmp_path / "a")[f"{HEALTH_EVENTS}-0000000002000.jsonl"]] == [
        "g",
        "h",
    ]


def test_a_restarted_querys_sink_takes_over(tmp_path: Path) -> None:
    events = DriverEvents()
    events.attach(_sink(tmp_path / "first"))
    events.write([_event("g", "one")], 1)
    events.attach(_sink(tmp_path / "second"))
    events.write([_event("g", "two")], 2)
    assert [e["reason"] for v in _written(tmp_path / "first").values() for e in v] == ["one"]
    assert [e["reason"] for v in _written(tmp_path / "second").values() for e in v] == ["two"]


def test_events_waiting_while_the_sink_arrives_on_another_thread_are_written_once(tmp_path: Path) -> None:
    events = DriverEvents()
    start = threading.Barrier(9)

    def writer(i: int) -> None:
        start.wait()
        events.write([_event(f"g{i}", "w")], 10 + i, wait=True)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    start.wait()
    events.attach(_sink(tmp_path / "a"))
    for t in threads:
        t.join()
    groups = sorted(e["group_id"] for v in _written(tmp_path / "a").values() for e in v)
    assert groups == [f"g{i}" for i in range(8)]
