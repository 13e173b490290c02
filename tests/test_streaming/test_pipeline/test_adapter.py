"""streaming.pipeline.adapter's group function, called the way applyInPandasWithState calls it -- without
Spark: real record bytes go through the query's own mapInArrow body (decode, collapse, pack), and
a stand-in for PySpark's GroupState keeps the state row between calls.  What the driver and the
output topics receive (snapshot / deleted / offset rows) is checked row by row."""

from __future__ import annotations

import json

import pandas as pd

from state import codec
from state.config import OffsetConfig
from state.expiry import all_deadlines
from streaming.pipeline.adapter import make_group_function
from streaming.pipeline.sinks import batch_tallies
from tests.support.group_state import FakeGroupState, call, of_kind
from tests.support.records import commit_key, commit_value, group_key

HOUR = 3_600_000
T0 = 1_700_000_000_000
RETENTION = 24 * HOUR


def test_snapshot_rows_carry_the_state_bytes_and_a_summary_with_the_next_deadline() -> None:
    settings = OffsetConfig(retention_ms=RETENTION)
    fn = make_group_function(settings, emit_offsets=False)
    state = FakeGroupState(now_ms=T0 + HOUR)
    rows = call(
        fn,
        state,
        [
            (commit_key("g", "t", 0), commit_value(5, T0)),
            (commit_key("g", "t", 0), commit_value(7, T0 + 10)),  # collapsed: the newest wins
            (commit_key("g", "t", 1), commit_value(9, T0 + 20)),
        ],
        first_offset=0,
    )
    (snap,) = of_kind(rows, "snapshot")
    assert not of_kind(rows, "offset")  # no feed unless a topic takes it
    group = codec.decode(snap["blob"])
    assert {tp: e[0] for tp, e in group.offsets.items()} == {("t", 0): 7, ("t", 1): 9}
    assert state.row is not None and state.row[1] == snap["blob"]
    summary = json.loads(snap["summary"])
    assert summary["offsets"] == 2 and summary["next_deadline_ms"] == T0 + 10 + RETENTION
    assert summary["next_deadline_ms"] == min(d for d in all_deadlines(group, settings).values() if d)
    assert state.timeout_ms == summary["next_deadline_ms"] - state.now_ms


def test_a_group_whose_last_offsets_are_deleted_leaves_a_deleted_row_with_its_last_summary() -> None:
    settings = OffsetConfig(retention_ms=RETENTION)
    fn = make_group_function(settings, emit_offsets=True)
    state = FakeGroupState(now_ms=T0 + HOUR)
    call(
        fn, state, [(commit_key("g", "t", 0), commit_value(5)), (commit_key("g", "t", 1), commit_value(6))], 0
    )
    # what the coordinator writes when the group's offsets are deleted: offset tombstones, then the
    # (simple) group's own tombstone once nothing is left
    gone = [(commit_key("g", "t", 0), None), (commit_key("g", "t", 1), None), (group_key("g"), None)]
    rows = call(fn, state, gone, first_offset=2)
    assert state.row is None  # state.remove(): no state row left for a gone group
    (deleted,) = of_kind(rows, "deleted")
    last = json.loads(deleted["body"])
    assert last["group_id"] == "g" and last["offsets"] == 2  # the summary before the deletion
    tombstones = of_kind(rows, "offset")
    assert sorted(json.loads(r["key"])["partition"] for r in tombstones) == [0, 1]
    assert all(r["body"] is None for r in tombstones)


def test_the_offsets_feed_has_a_row_only_for_offsets_that_changed() -> None:
    settings = OffsetConfig(retention_ms=RETENTION)
    fn = make_group_function(settings, emit_offsets=True)
    state = FakeGroupState(now_ms=T0 + HOUR)
    first = call(
        fn, state, [(commit_key("g", "t", 0), commit_value(5)), (commit_key("g", "t", 1), commit_value(6))], 0
    )
    assert len(of_kind(first, "offset")) == 2
    rows = call(fn, state, [(commit_key("g", "t", 1), commit_value(60, T0 + 5))], first_offset=2)
    (feed,) = of_kind(rows, "offset")
    value = json.loads(feed["body"])
    assert json.loads(feed["key"]) == {"group": "g", "topic": "t", "partition": 1}
    assert value["offset"] == 60 and value["expires_at_ms"] == T0 + 5 + RETENTION


def test_event_rows_carry_what_the_driver_counts_so_it_never_parses_their_json() -> None:
    """An event row's ``summary`` is its tally (`event_tally`); the sink's `batch_tallies` counts
    from it alone -- and agrees with the event JSON the outputs get."""
    settings = OffsetConfig(retention_ms=RETENTION)
    fn = make_group_function(settings, emit_offsets=False)
    state = FakeGroupState(now_ms=T0 + HOUR)
    rows = call(
        fn, state, [(commit_key("g", "t", 0), commit_value(5)), (commit_key("g", "t", 1), commit_value(6))], 0
    )
    # the retention passes with no record for the group: the timeout fires, the offsets expire
    # (the mirror's rule); the simple group with nothing left waits for the broker's sweep, whose
    # tombstones delete it
    state.now_ms = T0 + RETENTION + HOUR
    state.hasTimedOut = True
    rows += list(pd.concat(fn(("g",), iter([]), state)).to_dict("records"))
    state.hasTimedOut = False
    sweep = [(commit_key("g", "t", 0), None), (commit_key("g", "t", 1), None), (group_key("g"), None)]
    rows += call(fn, state, sweep, first_offset=2)
    events = of_kind(rows, "event")
    bodies = [json.loads(r["body"]) for r in events]
    assert [r["summary"].split("\t")[0] for r in events] == [b["type"] for b in bodies]
    tallies = batch_tallies([r["summary"] for r in events], [])
    expired = [b for b in bodies if b["type"] == "offsets_expired"]
    assert expired and tallies[("offsets_expired", "mirror")] == sum(b["count"] for b in expired) == 2
    assert tallies[("group_deleted", "expired")] == 1 and tallies[("event", "group_deleted")] == 1
    for b in bodies:
        assert tallies[("event", b["type"])] == sum(1 for x in bodies if x["type"] == b["type"])
