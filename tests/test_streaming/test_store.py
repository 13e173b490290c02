"""The driver store keeps what the query sends -- state bytes and a summary -- and renders a
group's full snapshot when it is read, once per change."""

from __future__ import annotations

import pytest

from state import codec
from state.config import OffsetConfig
from state.expiry import all_deadlines
from state.replay import fold
from state.snapshot import snapshot, summary
from streaming.serving.render import snapshot_renderer, with_assignor
from streaming.serving.store import SnapshotStore
from tests.test_observability.synthetic import STATE_SETTINGS
from tests.test_state.builders import DAY, MIN, Log, cm


def _group(generation: int) -> tuple[bytes, dict, dict]:
    log = Log()
    for gen in range(1, generation + 1):
        log.tick(MIN).classic("g", gen, [cm("a"), cm("b")])
    log.commit("g", "t", 0, 42)
    log.commit("g", "t", 1, 7)
    g = fold(None, log.records).group
    assert g is not None
    deadlines = all_deadlines(g, STATE_SETTINGS)
    expected = with_assignor(snapshot(g, STATE_SETTINGS, deadlines), "uniform")
    return codec.encode(g), summary(g, STATE_SETTINGS, deadlines), expected


def test_bytes_render_on_read_equal_to_the_executor_snapshot_and_are_cached() -> None:
    calls: list[bytes] = []
    render = snapshot_renderer(OffsetConfig(retention_ms=7 * DAY, confirm_grace_ms=11 * MIN), "uniform")

    def counting(blob: bytes) -> dict:
        calls.append(blob)
        return render(blob)

    store = SnapshotStore(renderer=counting)
    blob, summ, expected = _group(2)
    store.apply(0, [("g", blob, summ)])
    assert calls == [] and store.summaries() == [summ]  # nothing rendered until read
    first = store.group("g")
    assert first == expected and first["generation"] == 2 and first["offsets"][0]["offset"] == 42
    assert store.group("g") is first and store.snapshots() == [first] and len(calls) == 1
    # a change replaces the cached snapshot; the next read renders once more
    blob3, summ3, expected3 = _group(3)
    store.apply(1, [("g", blob3, summ3)])
    assert store.snapshots() == [expected3] and store.group("g") == expected3 and len(calls) == 2
    store.apply(2, [("g", None, None)])
    assert store.group("g") is None and store.snapshots() == [] and store.summaries() == []


def test_bytes_without_a_renderer_or_summary_are_refused() -> None:
    blob, summ, _ = _group(1)
    with pytest.raises(ValueError, match="renderer"):
        SnapshotStore().apply(0, [("g", blob, summ)])
    with pytest.raises(ValueError, match="summary"):
        SnapshotStore(renderer=lambda b: {}).apply(0, [("g", blob, None)])
