"""The driver store keeps what the query sends -- state bytes and a summary -- and renders a
group's full snapshot when it is read, through a cache bounded in bytes."""

from __future__ import annotations

import tracemalloc

import pytest

from lab.records import DAY, HOUR, MIN, Log, cm
from lab.synthetic import RENDERER, STATE_SETTINGS, empty_classic, kip848, stable_classic
from state import codec
from state.config import OffsetConfig
from state.expiry import all_deadlines
from state.replay import fold
from state.snapshot import snapshot, summary
from streaming.serving.render import assignor, snapshot_renderer
from streaming.serving.store import SnapshotStore, snapshot_size


def _group(generation: int, group_id: str = "g") -> tuple[bytes, dict, dict]:
    log = Log()
    for gen in range(1, generation + 1):
        log.tick(MIN).classic(group_id, gen, [cm("a"), cm("b")])
    log.commit(group_id, "t", 0, 42)
    log.commit(group_id, "t", 1, 7)
    g = fold(None, log.records).group
    assert g is not None
    deadlines = all_deadlines(g, STATE_SETTINGS)
    expected = snapshot(g, STATE_SETTINGS, deadlines)
    expected["assignor"], expected["assignor_source"] = "range", "log"
    assert assignor(g, "uniform") == ("range", "log")
    return codec.encode(g), summary(g, STATE_SETTINGS, deadlines), expected


def cached(store: SnapshotStore) -> tuple[int, int]:
    """(snapshots, approximate bytes) in the store's rendered-snapshot cache."""
    return len(store._cache), store._cached_bytes


def _counting() -> tuple[list[bytes], object]:
    calls: list[bytes] = []
    render = snapshot_renderer(OffsetConfig(retention_ms=7 * DAY, confirm_grace_ms=11 * MIN), "uniform")

    def counting(blob: bytes) -> dict:
        calls.append(blob)
        return render(blob)

    return calls, counting


def test_bytes_render_on_read_equal_to_the_executor_snapshot_and_are_cached() -> None:
    calls, counting = _counting()
    store = SnapshotStore(renderer=counting)  # type: ignore[arg-type]
    blob, summ, expected = _group(2)
    store.apply(0, [("g", blob, summ)])
    assert calls == [] and store.summaries() == [summ]  # nothing rendered until read
    first = store.group("g")
    assert first == expected and first["generation"] == 2 and first["offsets"][0]["offset"] == 42
    assert store.group("g") is first and len(calls) == 1
    assert store.states() == [("g", blob)] and cached(store) == (1, snapshot_size(first))
    # a change drops the cached snapshot; the next read renders once more
    blob3, summ3, expected3 = _group(3)
    store.apply(1, [("g", blob3, summ3)])
    assert cached(store) == (0, 0)
    assert store.group("g") == expected3 and len(calls) == 2
    store.apply(2, [("g", None, None)])
    assert store.group("g") is None and store.states() == [] and store.summaries() == []
    assert cached(store) == (0, 0)


def test_the_cache_keeps_the_most_recently_read_snapshots_within_its_bytes() -> None:
    calls, counting = _counting()
    rows = [(f"g{i}", *_group(2, f"g{i}")[:2]) for i in range(6)]
    one = snapshot_size(RENDERER(rows[0][1]))
    store = SnapshotStore(renderer=counting, cache_bytes=3 * one)  # type: ignore[arg-type]
    store.apply(0, rows)
    for gid, _, _ in rows:
        store.group(gid)
    assert cached(store) == (3, 3 * one) and len(calls) == 6
    # g3..g5 are cached: reading them renders nothing; g0 was evicted first
    for gid in ("g5", "g3", "g4"):
        store.group(gid)
    assert len(calls) == 6
    store.group("g0")  # renders, evicts the least recently read (g5)
    assert len(calls) == 7 and cached(store) == (3, 3 * one)
    store.group("g3")
    store.group("g5")
    assert len(calls) == 8
    # no budget: every read renders, nothing is kept
    store.cache_bytes = 0
    store.group("g1")
    store.group("g1")
    assert len(calls) == 10 and cached(store)[0] == 3  # a zero budget admits nothing new


def test_a_snapshots_size_estimate_is_near_what_python_allocates() -> None:
    """The cache's unit: within 1.6x either way of tracemalloc's count, for small and large groups
    of every shape the synthetic bench uses."""
    groups = [
        stable_classic("s1", 1),
        stable_classic("s50", 50),
        stable_classic("s200", 200, topics=5, members=20),
        stable_classic("m50", 2, topics=5, members=50),
        empty_classic("e50", 50, HOUR),
        kip848("k50", 50),
    ]
    for g in groups:
        blob = codec.encode(g)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            snap = RENDERER(blob)
            used = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
        assert used / 1.6 <= snapshot_size(snap) <= used * 1.6, (g.group_id, used, snapshot_size(snap))


def test_bytes_without_a_renderer_or_summary_are_refused() -> None:
    blob, summ, _ = _group(1)
    with pytest.raises(ValueError, match="renderer"):
        SnapshotStore().apply(0, [("g", blob, summ)])
    with pytest.raises(ValueError, match="summary"):
        SnapshotStore(renderer=lambda b: {}).apply(0, [("g", blob, None)])


# ----------------------------------------------------------------- the expiry deadlines' index
def _summary(group_id: str, deadline: int | None) -> dict:
    return {"group_id": group_id, "next_deadline_ms": deadline}


def test_due_deadline_is_the_earliest_of_the_current_states() -> None:
    store = SnapshotStore(renderer=RENDERER)
    store.apply(
        1,
        [
            ("a", b"1", _summary("a", 5_000)),
            ("b", b"2", _summary("b", 3_000)),
            ("c", b"3", _summary("c", None)),
        ],
    )
    assert store.due_deadline(0) == 3_000
    # b's new state moves its deadline: the old entry no longer counts
    store.apply(2, [("b", b"4", _summary("b", 9_000))])
    assert store.due_deadline(0) == 5_000
    # a deleted: its deadline goes with it; c never had one
    store.apply(3, [("a", None, None)])
    assert store.due_deadline(0) == 9_000
    store.apply(4, [("b", b"5", _summary("b", None))])
    assert store.due_deadline(0) is None


def test_due_deadline_forgets_what_a_later_batch_covered() -> None:
    store = SnapshotStore(renderer=RENDERER)
    store.load([("a", b"1", _summary("a", 1_000)), ("b", b"2", _summary("b", 2_000))])
    assert store.due_deadline(1_500) == 2_000  # a batch at 1,500 fired a's timeout
    assert store.due_deadline(0) == 2_000  # ... and a is not seen again (its state did not change)
    assert store.due_deadline(2_001) is None


def test_the_deadline_index_stays_bounded_by_the_groups() -> None:
    store = SnapshotStore(renderer=RENDERER)
    for batch in range(2_000):  # far deadlines never come up: their stale entries are rebuilt away
        store.apply(batch, [(f"g{i}", b"x", _summary(f"g{i}", 10**12 + batch)) for i in range(5)])
    assert len(store._deadlines) <= 2 * 5 + 1024
    assert store.due_deadline(0) == 10**12 + 1_999
