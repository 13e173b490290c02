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
the log (a restart after a crash must end in exactly the state of an uninterrupted run).  Real
traffic is commit after commit, so nearly every repeat still collapses.

Every other record (group metadata, KIP-848/share/streams records, unknown types, decode errors)
passes through untouched.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: rows buffered before collapsing: bounds executor memory, while still collapsing most repeats
COLLAPSE_ROWS: Final = 1 << 18

EXTRA_FIELDS: Final = (
    pa.field("n_commits", pa.int32(), nullable=False),
    pa.field("n_tombstones", pa.int32(), nullable=False),
)


def prepared_schema() -> pa.Schema:
    from decoders import OUTPUT_SCHEMA

    schema: pa.Schema = OUTPUT_SCHEMA
    for f in EXTRA_FIELDS:
        schema = schema.append(f)
    return schema


def prepared_spark_ddl() -> str:
    from decoders import OUTPUT_SPARK_DDL

    return f"{OUTPUT_SPARK_DDL}, n_commits int, n_tombstones int"


def _with_counts(batch: pa.RecordBatch, commits: np.ndarray, tombstones: np.ndarray) -> pa.RecordBatch:
    arrays = [*batch.columns, pa.array(commits, pa.int32()), pa.array(tombstones, pa.int32())]
    return pa.RecordBatch.from_arrays(arrays, schema=prepared_schema())


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

    sub = batch.take(pa.array(commit_idx))
    g = pc.dictionary_encode(sub.column("group_id")).indices.to_numpy(zero_copy_only=False)
    t = pc.dictionary_encode(sub.column("topic")).indices.to_numpy(zero_copy_only=False)
    p = sub.column("partition_num").to_numpy(zero_copy_only=False)
    off = sub.column("source_offset").to_numpy(zero_copy_only=False)
    order = np.lexsort((off, p, t, g))
    gs, ts, ps = g[order], t[order], p[order]
    sub_tomb = tomb[commit_idx][order]
    # A segment is a run of consecutive commits to one (group, topic, partition), or a single
    # tombstone; the last row of each segment (highest log offset) is the one we keep.
    starts = np.ones(order.size, dtype=bool)
    starts[1:] = (
        (gs[1:] != gs[:-1]) | (ts[1:] != ts[:-1]) | (ps[1:] != ps[:-1]) | sub_tomb[1:] | sub_tomb[:-1]
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
    from decoders import decode_arrow
    from streaming import worker_tune

    worker_tune.apply()
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        raw = batch
        if raw.num_rows and pc.any(pc.less(raw.column("partition"), 0)).as_py():
            # tick rows (streaming.source.ticks) only keep micro-batches running
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
