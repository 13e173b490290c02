"""`streaming.pipeline.progress.ProgressFollower.on_progress` with fake progress objects (the
shape of PySpark's `StreamingQueryProgress`): positions into readiness and completed batches into
the run status, triggers that ran no batch left out of the history.  Observed decode counts are the
sink's to count (tests/test_streaming/test_pipeline/test_sinks.py): a progress carrying them
adds nothing, or a batch would count twice."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from streaming.pipeline.progress import ProgressFollower, partition_offsets
from streaming.serving.run_status import HISTORY_KEPT, RunStatus
from streaming.serving.status import MirrorStatus
from streaming.settings import load_settings

TOPIC = "__consumer_offsets"


def progress(batch_id: int, end: dict[int, int], *, ran: bool = True, **observed: int) -> Any:
    source = SimpleNamespace(
        endOffset=json.dumps({TOPIC: {str(p): o for p, o in end.items()}}),
        latestOffset=json.dumps({TOPIC: {str(p): o + 5 for p, o in end.items()}}),
        description="KafkaV2[Subscribe[__consumer_offsets]]",
        numInputRows=10,
    )
    durations = {"triggerExecution": 300, **({"addBatch": 200} if ran else {})}
    return SimpleNamespace(
        batchId=batch_id,
        numInputRows=10 if ran else 0,
        durationMs=durations,
        timestamp="2026-11-26T12:00:00.000Z",
        sources=[source],
        stateOperators=[SimpleNamespace(numRowsTotal=3, memoryUsedBytes=4096)],
        observedMetrics={"decode": SimpleNamespace(asDict=lambda: observed)} if observed else {},
    )


def follower() -> tuple[ProgressFollower, MirrorStatus, RunStatus]:
    store = MirrorStatus()
    run = RunStatus()
    s = load_settings(bootstrap_servers="localhost:9092")
    return ProgressFollower(s, store, run, lambda: None), store, run


def test_positions_counts_and_batches() -> None:
    f, store, run = follower()
    store.set_targets({}, {0: 100, 1: 40})
    f.on_progress(progress(0, {0: 60, 1: 40}, records=70, errors=1, unknown=None))
    assert store.positions() == {0: 60, 1: 40} and not store.ready
    f.on_progress(progress(1, {0: 100, 1: 40}, records=30))
    assert store.ready
    assert run.observed_counts() == {}  # the sink counts them, with the batch's rows
    assert [b["batch_id"] for b in run.history()] == [0, 1]
    assert run.history()[0]["state_bytes"] == [4096] and run.history()[0]["input_rows"] == 10


def test_a_trigger_that_ran_no_batch_is_not_in_the_history() -> None:
    f, _store, run = follower()
    f.on_progress(progress(3, {0: 5}, ran=False))
    assert run.history() == []


def test_the_history_keeps_the_last_batches() -> None:
    run = RunStatus()
    for i in range(HISTORY_KEPT + 5):
        run.add_batch({"batch_id": i})
    assert [b["batch_id"] for b in run.history()][:1] == [5] and len(run.history()) == HISTORY_KEPT


def test_partition_offsets_of_other_or_broken_json() -> None:
    assert partition_offsets('{"t": {"0": 1}}', TOPIC) == {}
    assert partition_offsets("not json", TOPIC) == {}
    assert partition_offsets(None, TOPIC) == {}
    assert partition_offsets({TOPIC: {"2": 7}}, TOPIC) == {2: 7}


def test_query_health_through_the_run_status() -> None:
    assert RunStatus().healthy(None) and not RunStatus().healthy("query failed")

    def gone() -> bool:
        raise ConnectionError("py4j gateway is gone")

    assert not RunStatus(query_running=gone).healthy(None)
    assert RunStatus(query_running=lambda: True).healthy("an old failure")
