"""The dispatch table and the fold (`state.replay.dispatch`): every known record type has its replay
function, records at or before the group's last position are ignored (a replay after a restart
changes nothing), unknown types and decode errors are counted and kept, never fatal."""

from __future__ import annotations

from lab.records import Log, cm
from state.replay import DISPATCH, fold, replay
from state.replay.dispatch import is_applied, skipped_entry


def test_idempotent_replay_ignores_records_at_or_before_last_position() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.commit("g", "t", 0, 5)
    g = fold(None, log.records).group
    assert g is not None
    before = g.copy()
    again = fold(g, log.records)
    assert again.group == before and again.events == []


def test_unknown_types_and_decode_errors_are_counted_and_kept() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.unknown(99)
    log.decode_error("g")
    res = fold(None, log.records, group_id="g")
    g = res.group
    assert g is not None and g.counters["unknown_records"] == 1 and g.counters["decode_errors"] == 1
    assert [e["kind"] for e in g.errors] == ["unknown", "error"]
    assert [e["offset"] for e in res.skipped] == [1, 2]
    assert g.state == "Stable"  # nothing fatal


def test_dispatch_table_covers_every_known_record_type() -> None:
    from decoders import RECORD_TYPES

    known = set(RECORD_TYPES)
    # K=9 exists for 3.9/4.0 logs; K=18 was never released (decoders report it unknown)
    assert known - {18} <= set(DISPATCH)


def test_replay_is_the_fold_of_one_record() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.commit("g", "t", 0, 5)
    g = None
    for rec in log.records:
        res = replay(g, rec)
        g = res.group
    whole = fold(None, log.records)
    assert g is not None and whole.group is not None
    assert g == whole.group


def test_positions_at_or_before_the_last_applied_are_skipped() -> None:
    log = Log(partition=2, start_offset=10)
    log.commit("g", "t", 0, 5)
    g = fold(None, log.records).group
    assert g is not None and g.last_position == (2, 10)
    assert is_applied(g, (2, 10)) and is_applied(g, (2, 9)) and not is_applied(g, (2, 11))
    assert not is_applied(None, (0, 0))


def test_a_tombstone_of_something_never_seen_leaves_nothing() -> None:
    log = Log()
    log.offset_tombstone("ghost", "t", 0)
    log.classic_tombstone("ghost")
    res = fold(None, log.records)
    assert res.group is None and res.events == [] and res.skipped == []


def test_an_unknown_record_first_is_kept_under_the_group_id_given() -> None:
    """The adapter knows the grouping key; a record type with no decodable key does not."""
    log = Log()
    log.unknown(77)
    log.commit("g/ü", "t", 0, 1)
    res = fold(None, log.records, group_id="g/ü")
    assert res.group is not None and res.group.group_id == "g/ü"
    assert (
        res.skipped
        == [skipped_entry(log.records[0])]
        == [{"kind": "unknown", "partition": 0, "offset": 0, "record_type": 77}]
    )


def test_a_decode_errors_skipped_entry_names_its_field_and_reason() -> None:
    log = Log()
    err = log.decode_error("g")
    entry = skipped_entry(err)
    assert entry["kind"] == "error" and entry["field"] == err.field and entry["reason"] == err.reason
