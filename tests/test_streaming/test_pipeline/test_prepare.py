"""The pre-stateful step: decode + collapse offset commits to the newest per (group, topic, partition)."""

from __future__ import annotations

import random
import struct

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.pipeline.prepare import (
    GroupFilter,
    collapse_commits,
    decode_and_collapse,
    filter_packed,
    prepared_schema,
)
from tests.support.records import _s, commit_key, commit_value, group_key


def empty_group_value() -> bytes:
    # GroupMetadataValue v3: protocolType "consumer", generation 1, protocol/leader null, ts, []
    return struct.pack(">h", 3) + _s("consumer") + struct.pack(">ihhqi", 1, -1, -1, 1_700_000_000_000, 0)


def raw_batch(rows: list[tuple[bytes, bytes | None]], partition: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([k for k, _ in rows], pa.binary()),
            "value": pa.array([v for _, v in rows], pa.binary()),
            "partition": pa.array([partition] * len(rows), pa.int32()),
            "offset": pa.array(range(len(rows)), pa.int64()),
            "timestamp": pa.array([1_700_000_000_000 + i for i in range(len(rows))], pa.int64()),
        }
    )


def test_newest_commit_per_partition_wins_and_counts_are_kept() -> None:
    rows = [
        (commit_key("g", "t", 0), commit_value(10)),
        (group_key("g"), empty_group_value()),
        (commit_key("g", "t", 0), commit_value(11)),
        (commit_key("g", "t", 1), commit_value(5)),
        (commit_key("g", "t", 0), None),  # tombstone
        (commit_key("g", "t", 0), commit_value(12)),
        (commit_key("h", "t", 0), commit_value(7)),
        (b"\x00", b"garbage"),  # undecodable key passes through as an error row
    ]
    out = next(decode_and_collapse([raw_batch(rows)])).to_pylist()
    assert out[0].keys() == set(prepared_schema().names)
    by_offset = {r["source_offset"]: r for r in out}
    # g/t/0: the run of commits 0, 2 keeps both ends; the tombstone 4 is kept, and the commit 5
    assert sorted(by_offset) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert (by_offset[0]["committed_offset"], by_offset[0]["n_commits"]) == (10, 1)
    assert (by_offset[2]["committed_offset"], by_offset[2]["n_commits"]) == (11, 1)
    assert (by_offset[4]["is_tombstone"], by_offset[4]["n_tombstones"], by_offset[4]["n_commits"]) == (
        True,
        1,
        0,
    )
    assert by_offset[5]["committed_offset"] == 12
    assert (by_offset[5]["n_commits"], by_offset[5]["n_tombstones"]) == (1, 0)
    assert (by_offset[3]["n_commits"], by_offset[6]["n_commits"]) == (1, 1)
    assert by_offset[1]["record_type"] == 2 and by_offset[1]["n_commits"] == 0
    assert by_offset[7]["status"] == "error"


def test_k0_and_k1_commits_of_one_partition_collapse_together() -> None:
    rows = [(commit_key("g", "t", 0, k=k), commit_value(o)) for k, o in ((0, 1), (1, 2), (0, 3), (1, 4))]
    out = collapse_commits(_decoded(rows)).to_pylist()
    assert [(r["record_type"], r["committed_offset"], r["n_commits"]) for r in out] == [(0, 1, 1), (1, 4, 3)]


def _decoded(rows: list[tuple[bytes, bytes | None]]) -> pa.RecordBatch:
    from decoders import decode_arrow

    return decode_arrow(raw_batch(rows))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "ü"]),
            st.sampled_from(["t1", "t2"]),
            st.integers(0, 2),
            st.one_of(st.none(), st.integers(0, 1000)),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_collapse_equals_last_write_wins_replay(ops: list[tuple[str, str, int, int | None]]) -> None:
    """Folding the collapsed rows gives the same final offsets as folding every row in order."""
    rows = [(commit_key(g, t, p), None if o is None else commit_value(o)) for g, t, p, o in ops]
    expected: dict[tuple[str, str, int], int | None] = {}
    commits: dict[tuple[str, str, int], int] = {}
    for g, t, p, o in ops:
        expected[(g, t, p)] = o
        commits[(g, t, p)] = commits.get((g, t, p), 0) + (o is not None)
    # split arbitrarily into input batches: the step buffers and collapses across them
    batch = raw_batch(rows)
    cuts = sorted({*random.Random(len(rows)).sample(range(1, len(rows) + 1), k=min(3, len(rows))), len(rows)})
    pieces = [batch.slice(a, b - a) for a, b in zip([0, *cuts], cuts, strict=False) if b > a]
    out = [r for b in decode_and_collapse(pieces) for r in b.to_pylist()]
    out.sort(key=lambda r: r["source_offset"])
    got = {(r["group_id"], r["topic"], r["partition_num"]): r for r in out}  # last row per key
    assert {k: r["committed_offset"] for k, r in got.items()} == expected
    per_key: dict[tuple[str, str, int], int] = {}
    for r in out:
        k = (r["group_id"], r["topic"], r["partition_num"])
        per_key[k] = per_key.get(k, 0) + r["n_commits"]
    assert per_key == commits
    # the sequence of deletes per key survives
    for key in got:
        kinds = [
            "d" if r["is_tombstone"] else "c"
            for r in out
            if (r["group_id"], r["topic"], r["partition_num"]) == key
        ]
        want = ["d" if o is None else "c" for g, t, p, o in ops if (g, t, p) == key]
        # a run of commits keeps its first and its last row; tombstones all stay
        collapsed_want = [
            k
            for i, k in enumerate(want)
            if k == "d" or i + 1 == len(want) or want[i + 1] == "d" or i == 0 or want[i - 1] == "d"
        ]
        assert kinds == collapsed_want


def _rhythm_window(rows: list[dict]) -> bytes:
    """The commit-rhythm window the fold builds from prepared rows, in log order."""
    from state.rhythm import EMPTY, note_commits

    window, commits = EMPTY, 0
    for r in sorted(rows, key=lambda r: r["source_offset"]):
        if r["record_type"] in (0, 1) and not r["is_tombstone"]:
            commits += r["n_commits"]
            window = note_commits(window, r["source_timestamp_ms"], commits)
    return window


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(0, 4_000), min_size=1, max_size=60),
    partitions=st.lists(st.integers(0, 2), min_size=60, max_size=60),
    cut=st.integers(0, 60),
)
def test_the_commit_rhythm_is_the_same_however_batches_split_the_log(
    gaps: list[int], partitions: list[int], cut: int
) -> None:
    """Runs of commits collapse only within one rhythm bucket of record time: the window the fold
    builds from collapsed rows equals the uncollapsed log's, for any split into micro-batches (a
    restart after a crash replays from another split)."""
    base = 1_700_000_000_000
    times = [base + sum(gaps[: i + 1]) for i in range(len(gaps))]
    rows = [(commit_key("g", "t", partitions[i]), commit_value(100 + i)) for i in range(len(times))]

    def batch(lo: int, hi: int) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict(
            {
                "key": pa.array([k for k, _ in rows[lo:hi]], pa.binary()),
                "value": pa.array([v for _, v in rows[lo:hi]], pa.binary()),
                "partition": pa.array([0] * (hi - lo), pa.int32()),
                "offset": pa.array(range(lo, hi), pa.int64()),
                "timestamp": pa.array(times[lo:hi], pa.int64()),
            }
        )

    n = len(rows)
    uncollapsed = [
        {
            "source_offset": i,
            "record_type": 1,
            "is_tombstone": False,
            "n_commits": 1,
            "source_timestamp_ms": t,
        }
        for i, t in enumerate(times)
    ]
    whole = next(decode_and_collapse([batch(0, n)])).to_pylist()
    cut = min(cut, n)
    split = [
        r
        for lo, hi in ((0, cut), (cut, n))
        if hi > lo
        for r in next(decode_and_collapse([batch(lo, hi)])).to_pylist()
    ]
    assert _rhythm_window(whole) == _rhythm_window(uncollapsed) == _rhythm_window(split)
    assert sum(r["n_commits"] for r in whole) == n


def test_group_filter_marks_filtered_groups_and_keeps_records_without_a_group() -> None:
    keep = GroupFilter(r"app-.*", r"app-test-.*")
    batch = pa.RecordBatch.from_pydict(
        {"group_id": ["app-1", "app-test-1", "other", None], "packed": [b"a", b"b", b"c", b"d"]}
    )
    out = filter_packed(batch, keep)
    assert out.column("packed").to_pylist() == [b"a", b"", b"", b"d"]
    assert not GroupFilter(None, None)
    assert filter_packed(batch, GroupFilter(None, "zzz")) is batch
