"""The query's ``foreachBatch`` sink (`streaming.pipeline.sinks`): what it tallies per batch for the
mirror-level metrics (events, expiries, deletions, skipped records, timed rebalances, fold
failures), which errors are an interruption -- and, on the shared session with real streaming
queries, the decode counts a query observes (``DataFrame.observe``) counted with the batch's rows,
once per batch id.

Why not from the batch's progress: once in CI a poison batch stopped as it finished was in no
progress the driver read and was not run again, and its 26 decode errors and 2 unknown records
were never counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from state import events as ev
from state.timing import phases
from streaming.pipeline.adapter import event_tally
from streaming.pipeline.sinks import batch_tallies, interruption_line
from streaming.serving.catalogue import REBALANCE_DURATION_BUCKETS


def _sink(tmp_path: Path, store: Any, status: Any, spark: Any, got: list[dict[str, int]]) -> Any:
    from streaming.pipeline.sinks import MirrorSink
    from streaming.settings import load_settings

    (tmp_path / "none.jsonl").write_text("")
    settings = load_settings(
        source="capture", capture_path=tmp_path / "none.jsonl", checkpoint_location=str(tmp_path / "ck")
    )
    return MirrorSink(settings, store, status, spark, on_observed=got.append)


def _run(spark: Any, source: Path, checkpoint: Path, sink: Any, name: str | None = None) -> Any:
    """One query over the JSON files in ``source`` to its end (availableNow): each record one row
    the sink applies (a deleted group), its count and error count observed as the mirror's are."""
    from pyspark.sql import functions as F

    from streaming.pipeline.sinks import OBSERVATION

    rows = spark.readStream.schema("g string, bad int").option("maxFilesPerTrigger", 1).json(str(source))
    observed = rows.observe(
        name or OBSERVATION,
        F.count(F.lit(1)).alias("records"),
        F.sum("bad").alias("errors"),
        F.sum(F.lit(0)).alias("unknown"),
    )
    out = observed.selectExpr("'deleted' AS kind", "g AS group_id")
    q = (
        out.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180), "the query did not finish"
    assert q.exception() is None, q.exception()
    return q


def _uncommit(checkpoint: Path, batch_id: int) -> None:
    """The checkpoint as a stop before the batch's commit leaves it (the log and its checksum)."""
    for name in (str(batch_id), f".{batch_id}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)


@pytest.mark.spark
def test_each_batch_counts_once_with_its_rows_also_when_run_again(spark: Any, tmp_path: Path) -> None:
    from streaming.serving.status import MirrorStatus
    from streaming.serving.store import SnapshotStore

    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text('{"g": "a", "bad": 1}\n{"g": "b", "bad": 0}\n{"g": "c", "bad": 1}\n')
    (source / "b.json").write_text('{"g": "d", "bad": 0}\n')
    store, status, got = SnapshotStore(), MirrorStatus(), []
    checkpoint = tmp_path / "ck"
    q = _run(spark, source, checkpoint, _sink(tmp_path, store, status, spark, got))
    # zero counts are left out (as the run status adds nothing for them)
    assert got == [{"records": 3, "errors": 2}, {"records": 1}]
    # what the progress says agrees (the follower no longer adds it: it would count twice)
    by_batch = {
        p.batchId: p.observedMetrics["decode"].asDict() for p in q.recentProgress if p.observedMetrics
    }
    assert by_batch[0] == {"records": 3, "errors": 2, "unknown": 0}
    assert status.counted_batch == 1

    # batch 1 run again, as after a restart from the checkpoint before its commit: applied, not counted
    _uncommit(checkpoint, 1)
    q2 = _run(spark, source, checkpoint, _sink(tmp_path, store, status, spark, got))
    assert [p.batchId for p in q2.recentProgress if p.observedMetrics] == [1]  # it did run again
    assert got == [{"records": 3, "errors": 2}, {"records": 1}]

    # a new sink on a fresh store (a new process) counts what it applies
    _uncommit(checkpoint, 1)
    fresh: list[dict[str, int]] = []
    _run(spark, source, checkpoint, _sink(tmp_path, SnapshotStore(), MirrorStatus(), spark, fresh))
    assert fresh == [{"records": 1}]


@pytest.mark.spark
def test_a_sink_called_outside_a_query_reads_no_counts(spark: Any, tmp_path: Path) -> None:
    from streaming.serving.status import MirrorStatus
    from streaming.serving.store import SnapshotStore

    got: list[dict[str, int]] = []
    sink = _sink(tmp_path, SnapshotStore(), MirrorStatus(), spark, got)
    df = spark.range(2).selectExpr("'deleted' AS kind", "CAST(id AS STRING) AS group_id")
    sink(df, 0)
    assert got == [] and sink.observed_counts(0) is None


@pytest.mark.spark
def test_a_query_without_the_counts_logs_once_and_its_batches_go_on(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from streaming.serving.status import MirrorStatus
    from streaming.serving.store import SnapshotStore

    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text('{"g": "a", "bad": 1}\n')
    (source / "b.json").write_text('{"g": "b", "bad": 0}\n')
    store, status, got = SnapshotStore(), MirrorStatus(), []
    with caplog.at_level("WARNING", logger="coordinator_mirror.sink"):
        _run(spark, source, tmp_path / "ck", _sink(tmp_path, store, status, spark, got), name="other")
    assert got == [] and status.counted_batch == 1  # both batches applied, no counts
    lines = [r.getMessage() for r in caplog.records if "observed decode counts" in r.getMessage()]
    assert len(lines) == 1 and "no 'decode' metrics" in lines[0], lines  # the first failure only


# ------------------------------------------------------------------- without Spark: the tallies
def test_batch_tallies_count_events_expiries_deletions_and_skipped_records() -> None:
    # the event rows' tallies, as the adapter makes them next to the events
    events = [
        event_tally(e)
        for e in (
            ev.RebalanceCompleted("g", 0, 1, 2, before=1, after=2, skipped=0),
            ev.RebalanceCompleted("g", 0, 2, 3, before=2, after=3, skipped=0),
            ev.OffsetsExpired("g", None, None, None, count=3, partitions=("t:0",), origin="mirror"),
            ev.OffsetsExpired("h", 0, 9, 9, count=2, partitions=("t:1",), origin="broker"),
            ev.GroupDeleted("g", None, None, None, kind="classic", reason="expired"),
            ev.MemberJoined("x", 0, 1, 1, member_id="m"),
        )
    ]
    errors = [
        {"status": "unknown", "record_type": 99, "error_kind": None, "error_reason": None},
        {
            "status": "error",
            "record_type": 1,
            "error_kind": "unknown_version",
            "error_reason": "unknown value version 42 of OffsetCommitValue",
        },
        {
            "status": "error",
            "record_type": 2,
            "error_kind": "truncated",
            "error_reason": "truncated: string of 9 bytes, 2 left",
        },
        {
            "status": "error",
            "record_type": 2,
            "error_kind": "truncated",
            "error_reason": "truncated: int32 needs 4 bytes, 0 left",
        },
        {
            "status": "error",
            "record_type": None,
            "error_kind": "malformed",
            "error_reason": "malformed: negative string length -5",
        },
    ]
    t = batch_tallies(events, errors)
    assert t[("event", "rebalance_completed")] == 2
    assert t[("event", "offsets_expired")] == 2 and t[("event", "member_joined")] == 1
    assert t[("offsets_expired", "mirror")] == 3 and t[("offsets_expired", "broker")] == 2
    assert t[("group_deleted", "expired")] == 1
    assert t[("skipped", "unknown", "99", "unknown_record_type")] == 1
    assert t[("skipped", "error", "OFFSET_COMMIT", "unknown_version")] == 1
    assert t[("skipped", "error", "GROUP_METADATA", "truncated")] == 2  # byte counts are not labels
    assert t[("skipped", "error", "none", "malformed")] == 1


def test_a_timed_rebalance_fills_the_histograms_tallies() -> None:
    """A ``rebalance_timed`` tally carries each phase's duration: a count, a sum and the cumulative
    buckets it falls in, per (kind, phase)."""
    timed = ev.RebalanceTimed("g", 0, 5, 9, kind="consumer", started_ms=0, assigned_ms=1000, stable_ms=2500)
    t = batch_tallies([event_tally(timed)], [])
    assert t[("event", "rebalance_timed")] == 1
    for phase, ms in phases("consumer", 0, 1000, 2500):
        key = ("rebalance_seconds", "consumer", phase)
        assert (t[(*key, "count")], t[(*key, "sum_ms")]) == (1, ms)
        buckets = {k[3] for k in t if k[:3] == key and k[3].startswith("le:")}
        assert buckets == {f"le:{b}" for b in REBALANCE_DURATION_BUCKETS if ms <= b * 1000}, phase


def test_quarantined_groups_are_counted_by_error_type() -> None:
    t = batch_tallies([], [], [{"error_type": "InvariantError"}, {"error_type": "InvariantError"}, {}])
    assert t == {("fold_failure", "InvariantError"): 2, ("fold_failure", "Exception"): 1}


def test_only_an_interrupted_jvm_call_is_an_interruption() -> None:
    """Spark's regex over a whole py4j text overflowed its stack: the sink hands it one line."""
    assert interruption_line(RuntimeError("java.lang.InterruptedException")) is None  # not py4j's
