"""The step before the stateful fold: decode every record, then collapse offset commits.

Runs inside ``mapInArrow`` on the executors, one Spark task per Kafka partition range.  All records
of a group live in one `__consumer_offsets` partition, so a task sees every record of its groups
for that range in log order.

Collapsing: of a run of *consecutive* offset commits (K=0/1 values) to one (group, topic,
partition) in the range, only the newest can change the mirror -- the coordinator's own rule is
"the record at the newer log position wins" -- so the older ones are dropped here, in vectorized
numpy, before the rows cross the shuffle into the per-group Python step.  The kept row carries how
many commits it stands for (``n_commits``), so commit counters stay exact; so is the run's first
commit, so that the earliest record of every group in the range survives.  A tombstone ends a run
and is always kept, with the commit just before it: a commit-then-delete must still count as a
deleted offset, and the deleted commit may be the only record that tells the topic id's name --
collapsing across it would make the mirror's state depend on where micro-batches happen to split
the log (a restart after a crash must end in exactly the state of an uninterrupted run).  For the
same reason a run ends where a commit-rhythm bucket of record time does (`state.rhythm`).  Real
traffic is commit after commit, so nearly every repeat still collapses.

Every other record (group metadata, KIP-848/share/streams records, unknown types, decode errors)
passes through untouched.

Packing: the rows then cross the shuffle *packed per group* -- one row per group and chunk,
``(group_id, packed)`` with ``packed`` = MessagePack of the group's columns (`PACK_COLUMNS`, the
``shuffled`` columns of `decoders.columns`; a column that is constant within the group sent
once; a ``payload`` cell -- the typed record's own MessagePack form -- carried as is), plus the
per-group record counters the query observes (``n_*``, pruned before the shuffle).  The reason
is PySpark's cost model for ``applyInPandasWithState``: it builds a pandas Series for every
column of every group (~0.1 ms per column per group on this machine), so 25 columns cost ~3.6 ms
of CPU per group before our function runs, 2 columns ~1 ms (bench/stateful_floor.py).
Unpacking in the fold is ~10x cheaper and needs no pandas at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, Final

import msgpack
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decoders import arrow_schema, decode_arrow
from decoders.columns import COLUMNS, SHUFFLED
from state.rhythm import BUCKET_MS
from streaming.pipeline import worker_tune

#: rows buffered before collapsing: bounds a Python worker's memory, while still collapsing most
#: repeats.  Measured over 500k real records (25 partitions, 10k groups x 50 partitions x 2 rounds):
#: peak RSS of the step 499 MB at 1 << 18, 288 MB at 1 << 16 (250 MB at 1 << 15), the same CPU
#: (1.50 / 1.41 s), 9% more packed rows to shuffle (8,712 vs 7,996)
COLLAPSE_ROWS: Final = 1 << 16

#: the decoder's columns plus the collapse counters (`decoders.columns`, stage "collapse")
_PREPARED_SCHEMA: Final = arrow_schema(COLUMNS)


def prepared_schema() -> pa.Schema:
    return _PREPARED_SCHEMA


def _with_counts(batch: pa.RecordBatch, commits: np.ndarray, tombstones: np.ndarray) -> pa.RecordBatch:
    counts = {"n_commits": pa.array(commits, pa.int32()), "n_tombstones": pa.array(tombstones, pa.int32())}
    arrays = [counts[name] if name in counts else batch.column(name) for name in _PREPARED_SCHEMA.names]
    return pa.RecordBatch.from_arrays(arrays, schema=_PREPARED_SCHEMA)


def collapse_commits(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Keep the newest offset-commit row per (group, topic, partition); pass other rows through."""
    n = batch.num_rows
    if n == 0:
        return _with_counts(batch, np.zeros(0, np.int32), np.zeros(0, np.int32))
    rtype = batch.column("record_type").to_numpy(zero_copy_only=False)
    ok = np.asarray(pc.equal(batch.column("status"), "ok").to_numpy(zero_copy_only=False), dtype=bool)
    is_commit = ok & ((rtype == 0) | (rtype == 1))
    commit_idx = np.flatnonzero(is_commit)
    tomb = np.asarray(batch.column("is_tombstone").to_numpy(zero_copy_only=False), dtype=bool)
    if commit_idx.size == 0:
        zeros = np.zeros(n, np.int32)
        return _with_counts(batch, zeros, zeros)

    # codes over the whole batch, then the commit rows picked in numpy: taking the commit rows of
    # the (wide) batch first copied every column of nearly every row
    g = _filled(pc.dictionary_encode(batch.column("group_id")).indices, -1)[commit_idx]
    t = _filled(pc.dictionary_encode(batch.column("topic")).indices, -1)[commit_idx]
    p = _filled(batch.column("partition_num"), -1)[commit_idx]
    off = _filled(batch.column("source_offset"), -1)[commit_idx]
    bucket = _filled(batch.column("source_timestamp_ms"), 0)[commit_idx] // BUCKET_MS
    order = np.lexsort((off, p, t, g))
    gs, ts, ps, bs = g[order], t[order], p[order], bucket[order]
    sub_tomb = tomb[commit_idx][order]
    # A segment is a run of consecutive commits to one (group, topic, partition) within one
    # commit-rhythm bucket of record time (`state.rhythm.BUCKET_MS`), or a single tombstone; the
    # last row of each segment (highest log offset) is the one we keep.  Runs end at a bucket's
    # edge so that the rhythm window -- one point per bucket, its last commit -- is the same
    # however micro-batches split the log.
    starts = np.ones(order.size, dtype=bool)
    starts[1:] = (
        (gs[1:] != gs[:-1])
        | (ts[1:] != ts[:-1])
        | (ps[1:] != ps[:-1])
        | (bs[1:] != bs[:-1])
        | sub_tomb[1:]
        | sub_tomb[:-1]
    )
    run_starts = np.flatnonzero(starts)
    run_ends = np.append(run_starts[1:], order.size) - 1
    is_tomb_run = sub_tomb[run_ends]
    length = run_ends - run_starts + 1
    # The run's first commit is kept too (standing for itself): the earliest record of a group in
    # the range is then always present, and with it e.g. the creation time of a simple group.
    has_first = ~is_tomb_run & (length >= 2)
    first_rows = commit_idx[order[run_starts[has_first]]]
    last_rows = commit_idx[order[run_ends]]
    keep_commit = np.concatenate([first_rows, last_rows])

    keep = np.concatenate([np.flatnonzero(~is_commit), keep_commit])
    commits = np.zeros(n, np.int32)
    tombstones = np.zeros(n, np.int32)
    commits[first_rows] = 1
    commits[last_rows] = np.where(is_tomb_run, 0, length - has_first).astype(np.int32)
    tombstones[last_rows] = is_tomb_run.astype(np.int32)
    keep.sort()  # keep log order within the batch (not needed downstream, but cheap and tidy)
    out = batch.take(pa.array(keep))
    return _with_counts(out, commits[keep], tombstones[keep])


def decode_and_collapse(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: raw Kafka rows in, decoded + collapsed rows (prepared schema) out."""
    worker_tune.apply()
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        raw = batch
        if raw.num_rows and pc.any(pc.less(raw.column("partition"), 0)).as_py():
            # tick rows (streaming.pipeline.source.ticks) only keep micro-batches running
            raw = raw.filter(pc.greater_equal(raw.column("partition"), 0))
        if raw.num_rows == 0:
            continue
        decoded = decode_arrow(raw)
        pending.append(decoded)
        rows += decoded.num_rows
        if rows >= COLLAPSE_ROWS:
            yield from _flush(pending)
            pending, rows = [], 0
    if pending:
        yield from _flush(pending)


def _flush(pending: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    table = pa.Table.from_batches(pending).combine_chunks()
    for batch in table.to_batches():
        yield collapse_commits(batch)


# ------------------------------------------------------------------------------------------ packing
#: version of the packed-group layout (rows live only inside one micro-batch's shuffle, but a
#: mismatch -- e.g. executors on another build -- must fail loudly, not misread columns; bump it
#: when the shuffled columns of `decoders.columns` change)
PACK_VERSION: Final = 2
#: the columns a packed group carries, in this order: what `state.fold.fold_columns` and the
#: adapter's error rows read (``group_id`` is the grouping key itself)
PACK_COLUMNS: Final = SHUFFLED
#: highest record type counted by name (``type_<k>``) and the K=1/K=2 value versions counted
MAX_RECORD_TYPE: Final = 23
COUNTED_VERSIONS: Final = ((1, range(5)), (2, range(5)))


def counter_names() -> list[str]:
    """What the query observes per batch (summed over the packed rows' ``n_<name>`` columns).  A
    collapsed commit row stands for ``n_commits + n_tombstones`` records, so every count is of
    records read; ``rows`` counts the rows kept after collapsing."""
    names = ["records", "rows", "errors", "unknown", "commits", "offset_tombstones"]
    names += [f"type_{k}" for k in range(MAX_RECORD_TYPE + 1)]
    names += [f"type_{k}_v{v}" for k, versions in COUNTED_VERSIONS for v in versions]
    return names


def packed_schema() -> pa.Schema:
    fields = [pa.field("group_id", pa.string()), pa.field("packed", pa.binary(), nullable=False)]
    fields += [pa.field(f"n_{name}", pa.int64(), nullable=False) for name in counter_names()]
    return pa.schema(fields)


def packed_spark_ddl() -> str:
    return ", ".join(["group_id string", "packed binary", *(f"n_{n} bigint" for n in counter_names())])


def _filled(arr: pa.Array, fill: Any) -> np.ndarray:
    if arr.null_count:
        arr = pc.fill_null(arr, fill)
    return np.asarray(arr.to_numpy(zero_copy_only=False))


def _py_values(arr: pa.Array) -> list[Any]:
    """A column as a Python list with ``None`` for nulls, by the fastest route per type
    (``to_pylist`` builds a scalar object per cell first: 3-5x slower)."""
    t = arr.type
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        values: list[Any] = _filled(arr, False if pa.types.is_boolean(t) else 0).tolist()
        if arr.null_count:
            for i in np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False)).tolist():
                values[i] = None
        return values
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
        enc = pc.dictionary_encode(arr)
        words = enc.dictionary.to_pylist()
        words.append(None)
        return list(map(words.__getitem__, _filled(enc.indices, len(words) - 1).tolist()))
    return list(arr.to_pylist())  # pragma: no cover - every packed column is an int, bool, string or binary


def _group_counters(sb: pa.RecordBatch, starts: np.ndarray) -> list[np.ndarray]:
    """Per-group sums of `counter_names` over the group-sorted batch ``sb``."""
    n = sb.num_rows
    rtype = _filled(sb.column("record_type"), -1).astype(np.int64)
    version = _filled(sb.column("value_version"), -1).astype(np.int64)
    status = sb.column("status")
    ok = np.asarray(pc.equal(status, "ok").to_numpy(zero_copy_only=False), dtype=bool)
    is_offset = ok & ((rtype == 0) | (rtype == 1))
    commits = np.where(is_offset, _filled(sb.column("n_commits"), 0), 0).astype(np.int64)
    tombs = np.where(is_offset, _filled(sb.column("n_tombstones"), 0), 0).astype(np.int64)
    weight = np.where(is_offset, commits + tombs, 1)
    per_row: list[np.ndarray] = [
        weight,
        np.ones(n, np.int64),
        np.asarray(pc.equal(status, "error").to_numpy(zero_copy_only=False), dtype=np.int64),
        np.asarray(pc.equal(status, "unknown").to_numpy(zero_copy_only=False), dtype=np.int64),
        commits,
        tombs,
    ]
    per_row += [np.where(rtype == k, weight, 0) for k in range(MAX_RECORD_TYPE + 1)]
    per_row += [
        np.where((rtype == k) & (version == v), weight, 0)
        for k, versions in COUNTED_VERSIONS
        for v in versions
    ]
    return [np.add.reduceat(col, starts) for col in per_row]


def pack_groups(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Prepared rows (`prepared_schema`) -> one packed row per group (`packed_schema`), each
    group's rows in their input (log) order."""
    n = batch.num_rows
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=packed_schema())
    codes = _filled(pc.dictionary_encode(batch.column("group_id")).indices, -1)
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    ends = np.r_[starts[1:], n].tolist()
    sb = batch.take(pa.array(order))
    columns: list[tuple[bool, Any]] = []  # (constant over the whole batch, value or values)
    for name in PACK_COLUMNS:
        arr = sb.column(name)
        if arr.null_count == n:
            columns.append((True, None))
            continue
        values = _py_values(arr)
        first = values[0]
        columns.append((True, first) if values.count(first) == n else (False, values))
    blobs = []
    for lo, hi in zip(starts.tolist(), ends, strict=True):
        cells: list[Any] = [PACK_VERSION, hi - lo]
        for constant, values in columns:
            if constant:
                cells.append(values)
                continue
            part = values[lo:hi]
            first = part[0]
            cells.append(first if part.count(first) == len(part) else part)
        blobs.append(msgpack.packb(cells, use_bin_type=True))
    arrays = [sb.column("group_id").take(pa.array(starts)), pa.array(blobs, pa.binary())]
    arrays += [pa.array(c, pa.int64()) for c in _group_counters(sb, starts)]
    return pa.RecordBatch.from_arrays(arrays, schema=packed_schema())


def unpack_group(blob: bytes) -> dict[str, list[Any]]:
    """A packed group back into column lists (`PACK_COLUMNS`, ``None`` for nulls)."""
    cells = msgpack.unpackb(blob, raw=False, use_list=True)
    if not isinstance(cells, list) or len(cells) != len(PACK_COLUMNS) + 2 or cells[0] != PACK_VERSION:
        raise ValueError(f"not a version-{PACK_VERSION} packed group")
    n = cells[1]
    return {
        name: (cell if isinstance(cell, list) else [cell] * n)
        for name, cell in zip(PACK_COLUMNS, cells[2:], strict=True)
    }


def decode_collapse_pack(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of the query: raw Kafka rows in, packed groups (`packed_schema`) out."""
    for prepared in decode_and_collapse(batches):
        if prepared.num_rows:
            yield pack_groups(prepared)


class GroupFilter:
    """The group filter (settings ``group_allow_regex``, ``group_deny_regex``; Python ``re``,
    full match): a group is mirrored when it matches allow (if set) and not deny (if set).
    Records without a group id (undecodable keys) always pass: they are reported, not mirrored.
    Verdicts are cached per id: a task sees the same few thousand groups batch after batch."""

    def __init__(self, allow: str | None, deny: str | None) -> None:
        self.allow = allow
        self.deny = deny
        self._allow = re.compile(allow) if allow else None
        self._deny = re.compile(deny) if deny else None
        self._cache: dict[str, bool] = {}

    def __bool__(self) -> bool:
        return self._allow is not None or self._deny is not None

    def keeps(self, group_id: str | None) -> bool:
        if group_id is None:
            return True
        verdict = self._cache.get(group_id)
        if verdict is None:
            verdict = (self._allow is None or self._allow.fullmatch(group_id) is not None) and (
                self._deny is None or self._deny.fullmatch(group_id) is None
            )
            if len(self._cache) < 1_000_000:
                self._cache[group_id] = verdict
        return verdict

    def __reduce__(self) -> tuple[Any, ...]:  # ship the patterns, not the cache
        return (GroupFilter, (self.allow, self.deny))


def filter_packed(batch: pa.RecordBatch, keep: GroupFilter) -> pa.RecordBatch:
    """Packed rows of filtered groups get an empty ``packed`` cell: their record counters are
    still observed (records read stay exact), and the query drops them (``length(packed) > 0``)
    before the shuffle, so a filtered group never reaches the stateful step."""
    ids = batch.column("group_id").to_pylist()
    mask = [keep.keeps(g) for g in ids]
    if all(mask):
        return batch
    packed = batch.column("packed").to_pylist()
    cells = [p if k else b"" for p, k in zip(packed, mask, strict=True)]
    arrays = list(batch.columns)
    arrays[batch.schema.get_field_index("packed")] = pa.array(cells, pa.binary())
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)


def make_decode_collapse_pack(keep: GroupFilter) -> Any:
    """`decode_collapse_pack` with the group filter applied to its packed rows."""
    if not keep:
        return decode_collapse_pack

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for packed in decode_collapse_pack(batches):
            yield filter_packed(packed, keep)

    return run
