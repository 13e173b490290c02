"""The store's side of the preview (`streaming.app.preview`): which state a group is served with
when the driver has folded its records ahead of the micro-batches, and when the store refuses a
preview so that no record is ever folded twice into a group's state."""

from __future__ import annotations

from typing import Any

import pytest

from lab.records import MIN, Log, cm
from lab.synthetic import RENDERER, STATE_SETTINGS
from state import codec
from state.expiry import all_deadlines
from state.replay import fold
from state.snapshot import summary
from streaming.serving.store import SnapshotStore

# group ids from both base64 alphabets, and with the characters a name check gets wrong
GROUPS = ("orders-eu_1", "a+b/c=", "Zm9v-_x", "")


def _state(group_id: str, offset: int) -> tuple[bytes, dict[str, Any]]:
    log = Log()
    log.tick(MIN).classic(group_id, 1, [cm("a")])
    log.commit(group_id, "t-1", 0, offset)
    g = fold(None, log.records).group
    assert g is not None
    return codec.encode(g), summary(g, STATE_SETTINGS, all_deadlines(g, STATE_SETTINGS))


def _offset(store: SnapshotStore, group_id: str) -> int | None:
    snap = store.group(group_id)
    return None if snap is None else snap["offsets"][0]["offset"]


def _to(offset: int, seen: list[bytes | None] | None = None, ok: bool = True) -> Any:
    """A fold that makes the group's state with ``offset`` (and records what it was given)."""

    def run(state: bytes | None) -> tuple[bool, bytes | None, dict[str, Any] | None]:
        if seen is not None:
            seen.append(state)
        return (ok, *_state(gid_of[0], offset)) if ok else (False, None, None)

    gid_of: list[str] = []
    run.gid_of = gid_of  # type: ignore[attr-defined]
    return run


def _fold_to(group_id: str, offset: int, seen: list[bytes | None] | None = None, ok: bool = True) -> Any:
    f = _to(offset, seen, ok)
    f.gid_of.append(group_id)
    return f


@pytest.mark.parametrize("gid", GROUPS)
def test_no_preview_before_the_states_read_position_is_known(gid: str) -> None:
    store = SnapshotStore(renderer=RENDERER)
    assert store.covered() is None
    assert not store.preview(gid, 3, 10, 12, _fold_to(gid, 5))
    assert gid not in store


@pytest.mark.parametrize("gid", GROUPS)
def test_a_preview_is_served_until_a_batch_reads_past_it(gid: str) -> None:
    store = SnapshotStore(renderer=RENDERER)
    store.apply(0, [(gid, *_state(gid, 1))], covered={3: 100, 4: 7})
    seen: list[bytes | None] = []
    assert store.preview(gid, 3, 100, 104, _fold_to(gid, 2, seen))
    assert seen == [_state(gid, 1)[0]]  # folded onto the state the batch made
    assert _offset(store, gid) == 2
    # a batch that read to 103 made the group's state of offset 1.5: the preview holds records
    # past it (104) and already holds the batch's -- it stays
    store.apply(1, [(gid, *_state(gid, 3))], covered={3: 104})
    assert _offset(store, gid) == 2
    assert store.covered() == {3: 104, 4: 7}
    # the next preview folds onto the preview's state
    seen.clear()
    assert store.preview(gid, 3, 105, 105, _fold_to(gid, 4, seen))
    assert _offset(store, gid) == 4
    # a batch that read past everything the preview folded: its state is the group's
    store.apply(2, [(gid, *_state(gid, 9))], covered={3: 106})
    assert _offset(store, gid) == 9


@pytest.mark.parametrize("gid", GROUPS)
def test_records_a_batch_already_applied_are_never_folded_again(gid: str) -> None:
    store = SnapshotStore(renderer=RENDERER)
    store.apply(0, [(gid, *_state(gid, 1))], covered={0: 50})
    called: list[bytes | None] = []
    # records 40-55 straddle what the states hold (to 49): the group is left to its batch...
    assert not store.preview(gid, 0, 40, 55, _fold_to(gid, 7, called))
    assert called == [] and _offset(store, gid) == 1
    # ... and held until a batch has read past 55, even for records after them
    assert not store.preview(gid, 0, 56, 56, _fold_to(gid, 8, called))
    store.apply(1, [], covered={0: 56})
    assert not store.preview(gid, 0, 57, 57, _fold_to(gid, 8, called))
    assert called == []
    store.apply(2, [(gid, *_state(gid, 6))], covered={0: 58})
    assert store.preview(gid, 0, 58, 58, _fold_to(gid, 8, called))
    assert called == [_state(gid, 6)[0]] and _offset(store, gid) == 8
    # a record the preview folded before is not folded again (a consumer read it twice)
    assert not store.preview(gid, 0, 58, 58, _fold_to(gid, 9, called))
    assert _offset(store, gid) == 8


@pytest.mark.parametrize("gid", GROUPS)
def test_a_fold_that_fails_or_a_quarantined_group_is_left_to_its_batch(gid: str) -> None:
    store = SnapshotStore(renderer=RENDERER)
    store.apply(0, [(gid, *_state(gid, 1))], covered={0: 10})
    assert not store.preview(gid, 0, 10, 11, _fold_to(gid, 2, ok=False))
    assert _offset(store, gid) == 1
    # held until a batch has read the records the fold failed on and every record after them
    # it was given meanwhile (the state it holds lacks them)
    assert not store.preview(gid, 0, 12, 12, _fold_to(gid, 3))
    store.apply(1, [(gid, *_state(gid, 2))], covered={0: 12})
    assert not store.preview(gid, 0, 13, 13, _fold_to(gid, 3))
    store.apply(2, [(gid, *_state(gid, 2))], covered={0: 14})
    assert store.preview(gid, 0, 14, 14, _fold_to(gid, 3))
    store.quarantine([{"group_id": gid, "error_type": "X", "message": "m"}])
    assert not store.preview(gid, 0, 15, 15, _fold_to(gid, 4))
    assert store.group(gid)["offsets"][0]["offset"] == 3  # type: ignore[index]
    # the batch that folds the group again ends its quarantine; record 15, refused meanwhile, is
    # not in that batch's state: the preview waits for a batch that read it
    store.apply(3, [(gid, *_state(gid, 3))], covered={0: 15})
    assert gid not in store.quarantined
    assert not store.preview(gid, 0, 16, 16, _fold_to(gid, 5))
    store.apply(4, [], covered={0: 17})
    assert store.preview(gid, 0, 17, 17, _fold_to(gid, 5))
    assert _offset(store, gid) == 5


def test_a_new_group_and_a_deletion_through_the_preview() -> None:
    store = SnapshotStore(renderer=RENDERER)
    store.cover({0: 5, 1: 9})  # the driver's backfill read to these
    gid = "new-group+/"
    assert store.preview(gid, 1, 9, 9, _fold_to(gid, 1))
    assert gid in store and store.group_ids() == {gid}
    # deleted by the preview (a group tombstone): the batch's older state does not bring it back
    assert store.preview(gid, 1, 10, 11, lambda state: (True, None, None))
    assert gid not in store
    store.apply(0, [(gid, *_state(gid, 1))], covered={1: 10})
    assert gid not in store
    # the batch that read the tombstone deletes it too; a later commit makes it anew
    store.apply(1, [(gid, None, None)], covered={1: 12})
    assert gid not in store
    store.apply(2, [(gid, *_state(gid, 5))], covered={1: 13})
    assert _offset(store, gid) == 5


def test_cover_never_moves_back_and_keeps_other_partitions() -> None:
    store = SnapshotStore(renderer=RENDERER)
    store.cover({0: 5, 1: 9})
    store.apply(0, [], covered={0: 3, 2: 1})
    assert store.covered() == {0: 5, 1: 9, 2: 1}
    store.apply(1, [], covered=None)
    assert store.covered() == {0: 5, 1: 9, 2: 1}


def test_the_preview_delay_is_counted_in_cumulative_buckets() -> None:
    store = SnapshotStore(renderer=RENDERER)
    for seconds in (0.01, 0.07, 0.3, 12.0, 99.0):
        store.observe_preview_delay(seconds)
    counts, total, n = store.preview_delay()
    # buckets 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30 -- each counts every delay at most its bound
    assert counts == [1, 2, 2, 3, 3, 3, 3, 3, 4]
    assert n == 5 and total == pytest.approx(111.38)
