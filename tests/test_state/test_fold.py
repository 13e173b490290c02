"""The batch path: one group's rows as column lists (decoders.columns), collapsed commits, step_detail()."""

from __future__ import annotations

from typing import Any

from lab.records import DAY, HOUR, MIN, Log, cm, columns
from state import events as ev
from state.config import OffsetConfig
from state.fold import fold_columns, step_detail
from state.replay import fold


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


def _rows(cols: dict[str, list[Any]], lo: int, hi: int | None = None) -> dict[str, list[Any]]:
    return {name: values[lo:hi] for name, values in cols.items()}


def test_column_fold_equals_record_fold() -> None:
    log = _mixed_log()
    expected = fold(None, log.records, group_id="g")
    got = fold_columns(None, columns(log.records), group_id="g")
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
    got = fold_columns(None, columns(collapsed, n_commits=[counts.get(i, 1) for i in keep]), group_id="g")
    full = fold(None, records, group_id="g")
    assert got.group is not None and full.group is not None
    assert got.group.offsets == full.group.offsets
    assert got.group.counters["commits"] == full.group.counters["commits"] == 7
    committed = [e for e in got.events if isinstance(e, ev.OffsetsCommitted)]
    assert sum(e.count for e in committed) == 7


def test_empty_rows_and_already_applied_rows() -> None:
    log = _mixed_log()
    cols = columns(log.records)
    assert fold_columns(None, _rows(cols, 0, 0), group_id="g").group is None
    g = fold_columns(None, cols, group_id="g").group
    assert g is not None
    again = fold_columns(g.copy(), cols, group_id="g")
    assert again.group == g and again.events == []
    # rows whose first half was applied: only the rest counts
    half = fold_columns(None, _rows(cols, 0, 8), group_id="g").group
    rest = fold_columns(half, cols, group_id="g").group
    assert rest == g


def test_a_decode_error_row_is_counted_with_its_kind_and_reason() -> None:
    log = Log()
    log.commit("g", "t", 0, 5)
    bad = log.decode_error("g")
    res = fold_columns(None, columns(log.records), group_id="g")
    assert res == fold(None, log.records, group_id="g")
    assert res.group is not None and res.group.counters["decode_errors"] == 1
    assert res.skipped[-1]["offset"] == bad.source.offset and res.skipped[-1]["reason"] == bad.reason


def test_step_folds_expires_and_reports_the_deadline() -> None:
    s = OffsetConfig(retention_ms=HOUR, confirm_grace_ms=MIN)
    log = Log()
    log.commit("g", "t", 0, 5)
    g, events, deadline, _ = step_detail(None, columns(log.records), log.now_ms, config=s)
    assert g is not None and deadline == log.now_ms + HOUR
    assert [e.TYPE for e in events] == ["group_created", "offsets_committed"]
    g, events, deadline, _ = step_detail(g, None, log.now_ms + HOUR, config=s)  # the timeout call
    # Empty without offsets: the broker deletes it at its next sweep, so the group stays until then
    assert g is not None and g.exists and g.state == "Empty"
    assert [e.TYPE for e in events] == ["offsets_expired"]
    assert deadline == log.now_ms + HOUR + MIN + 1  # waiting for the broker's tombstones
    log.now_ms += HOUR + 30_000
    log.offset_tombstone("g", "t", 0)
    log.classic_tombstone("g")
    g, events, deadline, _ = step_detail(g, columns(log.records[-2:]), log.now_ms, config=s)
    assert g is None and deadline is None  # confirmed: remove the state row
    assert [(e.TYPE, e.reason) for e in events] == [("group_deleted", "expired")]
