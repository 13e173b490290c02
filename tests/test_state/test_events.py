"""Change events (`state.events`): each a flat JSON dict with stable field names, read back to the
same event."""

from __future__ import annotations

import json

import pytest

from lab.records import Log, cm
from state import events as ev
from state.replay import fold


def test_events_are_flat_json_and_round_trip() -> None:
    log = Log()
    log.classic("g", 1, [cm("a", assigned={"t": [0]})])
    log.commit("g", "t", 0, 1)
    log.classic("g", 3, [cm("b", assigned={"t": [0]}, instance_id="i")])
    log.classic("g", 4, [])
    log.offset_tombstone("g", "t", 0)  # an admin delete of an Empty group's offset
    log.classic_tombstone("g")
    events = fold(None, log.records).events
    assert {e.TYPE for e in events} >= {
        "group_created",
        "member_joined",
        "member_left",
        "rebalance_completed",
        "state_changed",
        "leader_changed",
        "assignment_changed",
        "offsets_committed",
        "offsets_deleted",
        "group_deleted",
    }
    for e in events:
        obj = e.to_json()
        assert obj["type"] == e.TYPE and obj["group_id"] == "g"
        assert {"source_partition", "source_offset", "source_timestamp_ms"} <= set(obj)
        for k, v in obj.items():
            assert not isinstance(v, dict), (e.TYPE, k)
            if isinstance(v, list):
                assert all(isinstance(x, str | int) for x in v), (e.TYPE, k)
        assert ev.event_from_json(json.loads(json.dumps(obj))) == e
    rebal = next(e for e in events if isinstance(e, ev.RebalanceCompleted) and e.after == 3)
    assert rebal.to_json() == {
        "type": "rebalance_completed",
        "group_id": "g",
        "source_partition": 0,
        "source_offset": 2,
        "source_timestamp_ms": log.now_ms,
        "before": 1,
        "after": 3,
        "skipped": 1,
        "cause": "rebalance",
    }


def test_every_event_type_of_the_readers_table_reads_back() -> None:
    """`EVENT_TYPES` (the reader's table, and the ``event`` label values of
    ``coordinator_mirror_events_total``): one class per ``type`` string; an event of each, with
    defaults everywhere but an awkward group id, goes through JSON text and back."""
    assert all(name == cls.TYPE for name, cls in ev.EVENT_TYPES.items())
    assert len({cls for cls in ev.EVENT_TYPES.values()}) == len(ev.EVENT_TYPES) >= 20
    # every event the mirror can write reads back (drift_suspected was written but not readable)
    # (by name: `dataclass(slots=True)` leaves the class it replaced among the subclasses)
    assert set(ev.EVENT_TYPES) == {cls.TYPE for cls in ev.Event.__subclasses__()}
    for cls in ev.EVENT_TYPES.values():
        e = cls("g/ü<b>", None, None, None)
        assert ev.event_from_json(json.loads(json.dumps(e.to_json()))) == e


def test_an_unknown_event_type_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        ev.event_from_json({"type": "no_such_event", "group_id": "g"})
    assert ev.tp_str("orders.eu", 12) == "orders.eu:12"
