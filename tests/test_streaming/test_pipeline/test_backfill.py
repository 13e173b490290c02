"""The backfill folded on the driver and its seed (`streaming.pipeline.backfill`, the seed cells of
`streaming.pipeline.adapter`), without Spark: the driver's fold of a log's first part, seeded into
the group function with the rest, ends where one fold of the whole log ends -- on the session
broker's real records of every scenario -- and a seed cell's own rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from state import codec
from state.config import OffsetConfig
from streaming.pipeline.adapter import SEED_MAGIC, fold_cells, read_seed_cell, seed_cell
from streaming.pipeline.backfill import DriverGroupState, fold_backfill, starting_offsets
from streaming.pipeline.prepare import GroupFilter, decode_collapse_pack
from tests.support.group_state import FakeGroupState
from tests.support.records import T0, commit_key, commit_value, group_key

HOUR = 3_600_000
CONFIG = OffsetConfig(retention_ms=24 * HOUR)
NO_FILTER = GroupFilter(None, None)


def _batch(records: list[tuple[int, int, int, bytes, bytes | None]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([r[3] for r in records], pa.binary()),
            "value": pa.array([r[4] for r in records], pa.binary()),
            "partition": pa.array([r[0] for r in records], pa.int32()),
            "offset": pa.array([r[1] for r in records], pa.int64()),
            "timestamp": pa.array([r[2] for r in records], pa.int64()),
        }
    )


def _captured(capture_file: Path) -> list[tuple[int, int, int, bytes, bytes | None]]:
    from streaming.pipeline.capture_format import read_capture

    return [(r.partition, r.offset, r.timestamp_ms, r.key, r.value) for r in read_capture(capture_file)]


def _packed_cells(records: list[tuple[int, int, int, bytes, bytes | None]]) -> dict[str | None, list[bytes]]:
    cells: dict[str | None, list[bytes]] = {}
    for packed in decode_collapse_pack([_batch(records)]):
        for gid, blob in zip(
            packed.column("group_id").to_pylist(), packed.column("packed").to_pylist(), strict=True
        ):
            cells.setdefault(gid, []).append(blob)
    return cells


@pytest.mark.broker
def test_a_seed_and_the_rest_of_the_log_end_where_one_fold_of_the_whole_log_ends(capture_file: Path) -> None:
    """Split every partition of the real log (every record family, tombstones, transactions) in
    two: the driver folds the first part, its seed cells go into the group function with the
    packed rows of the second part (as batch 0 of a seeded query gets them): every group's state
    is the state one fold of the whole log makes -- and a group deleted in the first part has no
    seed, one made in the second has no seed and still folds."""
    records = _captured(capture_file)
    now = max(r[2] for r in records) + HOUR
    whole = fold_backfill([_batch(records)], CONFIG, NO_FILTER, emit_offsets=False, now_ms=now)
    first: list[Any] = []
    rest: list[Any] = []
    for p in {r[0] for r in records}:
        mine = [r for r in records if r[0] == p]
        first += mine[: len(mine) // 2]
        rest += mine[len(mine) // 2 :]
    part = fold_backfill([_batch(first)], CONFIG, NO_FILTER, emit_offsets=False, now_ms=now)
    assert part.seeds and len(part.seeds) < len(whole.seeds) + 5
    seeds = dict(part.seeds)
    cells = _packed_cells(rest)
    ended: dict[str, tuple[int, bytes]] = {}
    deadlines: dict[str, int | None] = {}
    for gid in (seeds.keys() | cells.keys()) - {None}:
        state = FakeGroupState(now_ms=now)
        rows = fold_cells(
            gid, [*([seeds[gid]] if gid in seeds else []), *cells.get(gid, [])], state, CONFIG, False
        )
        assert not [r for r in rows if r[1] == "quarantine"], rows
        if state.row is not None:
            ended[gid] = state.row
            deadlines[gid] = None if state.timeout_ms is None else now + state.timeout_ms
    expected = {gid: read_seed_cell(cell) for gid, cell in whole.seeds}
    assert ended.keys() == expected.keys()
    assert any(d is not None for d in deadlines.values())
    for gid, (version, blob) in ended.items():
        assert version == expected[gid].version, gid
        assert codec.decode(blob) == codec.decode(expected[gid].blob), gid
        # the timeout: the seed's deadline where no record came after the split, else the fold's
        assert deadlines[gid] == expected[gid].deadline_ms, gid
    # the decode counts are the query's: every record counted once
    assert whole.observed["records"] == len(records)
    assert whole.observed["records"] == part.observed["records"] + len(rest)
    assert whole.groups == len({gid for gid in _packed_cells(records) if gid is not None})


@pytest.mark.broker
def test_a_backfill_folded_in_steps_ends_where_one_fold_ends(
    capture_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``records_per_fold`` small (and the decode step's buffer too, so that packed rows come
    every few records): the groups folded step after step, each group's state carried between
    the steps as the query's micro-batches carry it -- the same states in the end."""
    from streaming.pipeline import prepare

    records = _captured(capture_file)
    now = max(r[2] for r in records) + HOUR
    once = fold_backfill([_batch(records)], CONFIG, NO_FILTER, emit_offsets=False, now_ms=now)
    monkeypatch.setattr(prepare, "COLLAPSE_ROWS", 10)
    batches = [_batch(records[i : i + 7]) for i in range(0, len(records), 7)]
    steps = fold_backfill(batches, CONFIG, NO_FILTER, emit_offsets=False, now_ms=now, records_per_fold=20)
    assert len(records) > 100  # many steps
    # the same records counted; more rows kept (each step collapses only its own commits)
    assert {k: v for k, v in steps.observed.items() if k != "rows"} == {
        k: v for k, v in once.observed.items() if k != "rows"
    }
    assert steps.observed["rows"] >= once.observed["rows"]
    assert dict(steps.seeds).keys() == dict(once.seeds).keys()
    for gid, cell in once.seeds:
        seed, mine = read_seed_cell(cell), read_seed_cell(dict(steps.seeds)[gid])
        assert mine.version == seed.version and codec.decode(mine.blob) == codec.decode(seed.blob), gid
        assert mine.deadline_ms == seed.deadline_ms, gid


def _commits(*offsets: int) -> list[bytes]:
    records = [
        (0, i, T0 + i, commit_key("g", "t", i), commit_value(o, T0 + i)) for i, o in enumerate(offsets)
    ]
    return _packed_cells(records)["g"]


def test_a_seed_alone_is_stored_with_its_timeout_and_emits_nothing() -> None:
    """Batch 0 of a seeded query: a group with no new record stores its seed and sets the timeout
    of the deadline the cell carries -- and emits nothing (the driver applied its outputs; a
    restart before batch 0 is committed recovers them from the seed)."""
    driver = DriverGroupState(now_ms=T0 + HOUR)
    fold_cells("g", _commits(5, 6), driver.new_call(), CONFIG, False)
    assert driver.get is not None and driver.timeout_ms is not None
    cell = seed_cell(*driver.get, driver.deadline_ms)
    assert cell.startswith(SEED_MAGIC)
    assert read_seed_cell(cell) == (*driver.get, T0 + HOUR + driver.timeout_ms, True)
    state = FakeGroupState(now_ms=T0 + 2 * HOUR)
    assert fold_cells("g", [cell], state, CONFIG, False) == []
    assert state.row == driver.get
    assert state.timeout_ms == driver.timeout_ms - HOUR  # the same deadline, an hour later
    # a deadline passed since the driver's fold: due at the next trigger, which folds the expiry
    late = FakeGroupState(now_ms=driver.deadline_ms + HOUR)
    assert fold_cells("g", [cell], late, CONFIG, False) == []
    assert late.timeout_ms == 1
    # a group with no deadline (no offsets): no timeout
    bare = FakeGroupState(now_ms=T0)
    assert fold_cells("g", [seed_cell(*driver.get, None)], bare, CONFIG, False) == []
    assert bare.row == driver.get and bare.timeout_ms is None


def test_a_seed_cell_without_its_deadline_is_folded_again() -> None:
    """A cell of the first seed layout (no deadline: magic, codec version, bytes) is folded as a
    stored state, which finds the deadline, and its snapshot emitted."""
    driver = DriverGroupState(now_ms=T0 + HOUR)
    fold_cells("g", _commits(5, 6), driver.new_call(), CONFIG, False)
    assert driver.get is not None
    old = SEED_MAGIC + driver.get[0].to_bytes(4, "big", signed=True) + driver.get[1]
    assert read_seed_cell(old) == (*driver.get, None, False)
    state = FakeGroupState(now_ms=T0 + 2 * HOUR)
    rows = fold_cells("g", [old], state, CONFIG, False)
    assert [r[1] for r in rows] == ["snapshot"] and json.loads(rows[0][4])["offsets"] == 2
    assert state.row is not None and codec.decode(state.row[1]) == codec.decode(driver.get[1])
    assert state.timeout_ms == driver.timeout_ms - HOUR


def test_rows_after_a_seed_fold_onto_it() -> None:
    driver = DriverGroupState(now_ms=T0 + HOUR)
    fold_cells("g", _commits(5), driver, CONFIG, False)
    state = FakeGroupState(now_ms=T0 + HOUR)
    later = [(0, 10, T0 + 10, commit_key("g", "t", 1), commit_value(9, T0 + 10))]
    cell = seed_cell(*driver.get, driver.deadline_ms)  # type: ignore[misc]
    rows = fold_cells("g", [cell, *_packed_cells(later)["g"]], state, CONFIG, False)
    assert state.row is not None
    assert {tp: e[0] for tp, e in codec.decode(state.row[1]).offsets.items()} == {("t", 0): 5, ("t", 1): 9}
    assert "snapshot" in [r[1] for r in rows]


def test_a_quarantined_seed_stays_quarantined_and_a_stored_state_wins() -> None:
    state = FakeGroupState(now_ms=T0)
    assert fold_cells("g", [seed_cell(-3, b"last good", None)], state, CONFIG, False) == []
    assert state.row == (-3, b"last good")  # reported by the driver's fold; nothing again here
    assert state.timeout_ms is None
    driver = DriverGroupState(now_ms=T0 + HOUR)
    fold_cells("g", _commits(5), driver, CONFIG, False)
    stored = FakeGroupState(now_ms=T0 + HOUR)
    fold_cells("g", _commits(7), stored, CONFIG, False)
    kept = stored.row
    fold_cells("g", [seed_cell(*driver.get, driver.deadline_ms)], stored, CONFIG, False)  # type: ignore[misc]
    assert stored.row == kept


def test_a_driver_call_without_a_timeout_clears_the_last_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in Spark, a timeout lasts until the group's next call: a call that sets none (here the
    group's fold fails: quarantined) leaves the seed without a deadline."""
    from streaming.pipeline import adapter

    driver = DriverGroupState(now_ms=T0 + HOUR)
    fold_cells("g", _commits(5), driver.new_call(), CONFIG, False)
    assert driver.deadline_ms is not None

    def failing(*args: object, **kwargs: object) -> None:
        raise ValueError("a fold that fails")

    monkeypatch.setattr(adapter, "step_detail", failing)
    rows = fold_cells("g", _commits(6), driver.new_call(), CONFIG, False)
    assert [r[1] for r in rows][:1] == ["quarantine"]
    assert driver.get is not None and driver.get[0] < 0 and driver.deadline_ms is None


def test_a_deleted_group_leaves_no_seed_and_filtered_groups_are_counted_not_folded() -> None:
    records = [
        (0, 0, T0, commit_key("gone", "t", 0), commit_value(1, T0)),
        (0, 1, T0 + 1, commit_key("gone", "t", 0), None),
        (0, 2, T0 + 2, group_key("gone"), None),  # offsets deleted, then the group (DeleteGroups)
        (0, 3, T0 + 3, commit_key("kept", "t", 0), commit_value(2, T0 + 3)),
        (0, 4, T0 + 4, commit_key("skip-me", "t", 0), commit_value(3, T0 + 4)),
    ]
    out = fold_backfill([_batch(records)], CONFIG, GroupFilter(None, "skip-.*"), emit_offsets=True, now_ms=T0)
    assert [g for g, _ in out.seeds] == ["kept"]
    assert out.observed["records"] == 5 and out.groups == 2
    # made and deleted within the backfill: its events, no snapshot, nothing stored
    assert {r.kind for r in out.rows if r.group_id == "gone"} == {"event"}
    kinds = {(r.group_id, r.kind) for r in out.rows}
    assert ("kept", "offset") in kinds and ("kept", "snapshot") in kinds
    assert not any(r.group_id == "skip-me" for r in out.rows)


def test_starting_offsets_name_every_partition() -> None:
    assert json.loads(starting_offsets("__consumer_offsets", {3: 10, 0: 0})) == {
        "__consumer_offsets": {"0": 0, "3": 10}
    }
