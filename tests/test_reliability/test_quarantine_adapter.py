"""Quarantine at the group boundary, in the group function itself (no Spark): real record bytes go
through the query's own decode/collapse/pack body, a stand-in GroupState keeps the state row.

* state bytes from a future codec version: the group is quarantined with its bytes untouched,
  records for it keep it quarantined, and a group tombstone ends the quarantine;
* a record sequence that breaks a replay invariant (a classic leader that is not a member):
  quarantined with the record's position and type, the last good state kept, and a later full
  GroupMetadata record recovers it.
"""

from __future__ import annotations

import json

from state import codec
from state.config import OffsetConfig
from streaming.pipeline.adapter import make_group_function
from tests.support.group_state import FakeGroupState, call, of_kind
from tests.support.records import classic_value, commit_key, commit_value, group_key

T0 = 1_700_000_000_000


def test_state_bytes_of_a_future_codec_version_quarantine_until_a_group_tombstone() -> None:
    fn = make_group_function(OffsetConfig(), emit_offsets=False)
    state = FakeGroupState(now_ms=T0 + 1000)
    future = bytes([codec.CURRENT_VERSION + 7]) + b"\x93\x01\x02\x03"
    state.row = (codec.CURRENT_VERSION + 7, future)

    rows = call(fn, state, [(commit_key("g", "t", 0), commit_value(5, T0))], first_offset=10)
    (q,) = of_kind(rows, "quarantine")
    info = json.loads(q["body"])
    assert info["error_type"] == "StateCodecError" and info["phase"] == "state"
    assert "newer than this code" in info["message"]
    assert (info["source_partition"], info["source_offset"]) == (0, 10)
    assert not of_kind(rows, "snapshot")
    (event,) = of_kind(rows, "event")
    assert json.loads(event["body"])["type"] == "group_quarantined"
    assert state.row == (-(codec.CURRENT_VERSION + 7), future)  # the bytes are kept as they were

    # another commit: still unreadable, still quarantined, no second event
    rows = call(fn, state, [(commit_key("g", "t", 0), commit_value(6, T0))], first_offset=11)
    assert of_kind(rows, "quarantine") and not of_kind(rows, "event")
    assert state.row is not None and state.row[1] == future

    # the coordinator deletes the group (offset tombstone, group tombstone), then it is used again
    rows = call(
        fn,
        state,
        [
            (commit_key("g", "t", 0), None),
            (group_key("g"), None),
            (commit_key("g", "t", 1), commit_value(42, T0 + 5)),
        ],
        first_offset=12,
    )
    assert not of_kind(rows, "quarantine")
    assert [json.loads(e["body"])["type"] for e in of_kind(rows, "event")][-1] == "group_recovered"
    (snap,) = of_kind(rows, "snapshot")
    group = codec.decode(snap["blob"])
    assert {tp: e[0] for tp, e in group.offsets.items()} == {("t", 1): 42}
    assert state.row is not None and state.row[0] > 0


def test_future_state_then_a_bare_group_tombstone_deletes_the_group() -> None:
    fn = make_group_function(OffsetConfig(), emit_offsets=False)
    state = FakeGroupState(now_ms=T0 + 1000)
    state.row = (-(codec.CURRENT_VERSION + 1), bytes([codec.CURRENT_VERSION + 1]) + b"\x00")
    rows = call(fn, state, [(group_key("g"), None)], first_offset=3)
    assert not of_kind(rows, "quarantine")
    (deleted,) = of_kind(rows, "deleted")
    assert json.loads(deleted["body"]) == {"group_id": "g"}
    assert state.row is None


def test_a_leader_outside_the_members_quarantines_and_a_full_group_record_recovers() -> None:
    fn = make_group_function(OffsetConfig(), emit_offsets=False)
    state = FakeGroupState(now_ms=T0 + 1000)
    rows = call(
        fn,
        state,
        [(commit_key("g", "t", 0), commit_value(5, T0)), (group_key("g"), classic_value("m-a", ["m-a"]))],
        first_offset=0,
    )
    (good,) = of_kind(rows, "snapshot")
    good_row = state.row

    rows = call(fn, state, [(group_key("g"), classic_value("m-x", ["m-a", "m-b"], 2))], first_offset=2)
    (q,) = of_kind(rows, "quarantine")
    info = json.loads(q["body"])
    assert info["error_type"] == "InvariantError" and "m-x" in info["message"]
    assert (info["source_offset"], info["record_type"]) == (2, 2)
    assert not of_kind(rows, "snapshot")
    assert state.row is not None and good_row is not None
    assert state.row == (-good_row[0], good_row[1])  # the last good state, marked

    rows = call(fn, state, [(group_key("g"), classic_value("m-b", ["m-a", "m-b"], 3))], first_offset=3)
    assert not of_kind(rows, "quarantine")
    (snap,) = of_kind(rows, "snapshot")
    recovered = codec.decode(snap["blob"])
    assert recovered.leader == "m-b" and set(recovered.members) == {"m-a", "m-b"}
    assert {tp: e[0] for tp, e in recovered.offsets.items()} == {("t", 0): 5}  # kept from before
    assert json.loads(good["summary"])["offsets"] == 1
    assert [json.loads(e["body"])["type"] for e in of_kind(rows, "event")][-1] == "group_recovered"
