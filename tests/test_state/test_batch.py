"""The batch path: frames shaped like decoders.OUTPUT_SCHEMA, collapsed commits, step()."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from state import events as ev
from state.config import OffsetConfig
from state.fold import fold_frame, frame_lists, public_frame_lists, step
from state.replay import fold

from .builders import DAY, HOUR, MIN, Log, cm, frame


def _mixed_log() -> Log:
    log = Log(partition=4, start_offset=500)
    log.new_empty_group("g")
    log.tick(MIN).classic("g", 1, [cm("a", ["t"], {"t": [0, 1]})])
    for i in range(3):
        log.tick(MIN)
        log.commit("g", "t", 0, 10 + i, topic_id="TID", leader_epoch=2)
        log.commit("g", "t", 1, 20 + i, metadata="meta")
    log.unknown()
    log.tick(MIN).classic("g", 2, [])
    log.offset_tombstone("g", "t", 1)
    log.commit("g", "u", 0, 1, expire_ts=log.now_ms + DAY)
    return log


@pytest.mark.parametrize("spark", [False, True], ids=["decoders-dtypes", "spark-dtypes"])
def test_frame_fold_equals_record_fold(spark: bool) -> None:
    log = _mixed_log()
    expected = fold(None, log.records, group_id="g")
    got = fold_frame(None, frame(log.records, spark_types=spark), group_id="g")
    assert got.group == expected.group
    assert got.events == expected.events
    assert got.skipped == expected.skipped


def test_collapsed_commits_with_n_commits() -> None:
    """The caller kept only the newest commit per partition and counted the others."""
    log = _mixed_log()
    records = log.records
    commit_rows = [i for i, r in enumerate(records) if r.record_type == 1 and r.value is not None]
    newest: dict[tuple[str, int], int] = {}
    counts: dict[int, int] = {}
    for i in commit_rows:
        tp = (records[i].key.topic, records[i].key.partition)
        newest[tp] = i
    for i in commit_rows:
        tp = (records[i].key.topic, records[i].key.partition)
        counts[newest[tp]] = counts.get(newest[tp], 0) + 1
    keep = [
        i
        for i in range(len(records))
        if i not in commit_rows or newest[(records[i].key.topic, records[i].key.partition)] == i
    ]
    collapsed = [records[i] for i in keep]
    got = fold_frame(None, frame(collapsed, n_commits=[counts.get(i, 1) for i in keep]), group_id="g")
    full = fold(None, records, group_id="g")
    assert got.group is not None and full.group is not None
    assert got.group.offsets == full.group.offsets
    assert got.group.counters["commits"] == full.group.counters["commits"] == 7
    committed = [e for e in got.events if isinstance(e, ev.OffsetsCommitted)]
    assert sum(e.count for e in committed) == 7


def test_block_columns_equal_public_columns() -> None:
    log = _mixed_log()
    for spark in (False, True):
        df = frame(log.records, spark_types=spark)
        fast = frame_lists(df)
        slow = public_frame_lists(df)
        assert fast == slow
        assert fast["leader_epoch"][-1] is None and fast["committed_offset"][-1] == 1
        # a sliced, non-consolidated frame (as a groupby may hand over) works too
        sub = pd.concat([df.iloc[:3], df.iloc[3:]], axis=0)
        assert fold_frame(None, sub, group_id="g").group == fold(None, log.records, group_id="g").group


def test_empty_frame_and_already_applied_rows() -> None:
    log = _mixed_log()
    df = frame(log.records)
    assert fold_frame(None, df.iloc[:0], group_id="g").group is None
    g = fold_frame(None, df, group_id="g").group
    assert g is not None
    again = fold_frame(g.copy(), df, group_id="g")
    assert again.group == g and again.events == []
    # a frame whose first half was applied: only the rest counts
    half = fold_frame(None, df.iloc[:8].reset_index(drop=True), group_id="g").group
    rest = fold_frame(half, df, group_id="g").group
    assert rest == g


def test_nan_strings_and_object_ints_are_nulls() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.commit("g", "t", 0, 5)
    df = frame(log.records, spark_types=True)
    df["metadata"] = [np.nan, np.nan]
    df["leader_epoch"] = pd.Series([None, None], dtype=object)
    g = fold_frame(None, df, group_id="g").group
    assert g is not None and g.offsets[("t", 0)][1] is None and g.offsets[("t", 0)][2] is None


def test_step_folds_expires_and_reports_the_deadline() -> None:
    s = OffsetConfig(retention_ms=HOUR, confirm_grace_ms=MIN)
    log = Log()
    log.commit("g", "t", 0, 5)
    df = frame(log.records)
    g, events, deadline = step(None, df, log.now_ms, config=s)
    assert g is not None and deadline == log.now_ms + HOUR
    assert [e.TYPE for e in events] == ["group_created", "offsets_committed"]
    g, events, deadline = step(g, None, log.now_ms + HOUR, config=s)  # the timeout call
    assert g is not None and not g.exists
    assert [e.TYPE for e in events] == ["offsets_expired", "group_deleted"]
    assert deadline == log.now_ms + HOUR + MIN + 1  # waiting for the broker's tombstones
    log.now_ms += HOUR + 30_000
    log.offset_tombstone("g", "t", 0)
    log.classic_tombstone("g")
    g, events, deadline = step(g, frame(log.records[-2:]), log.now_ms, config=s)
    assert g is None and deadline is None and events == []  # confirmed: remove the state row
