"""The step before the stateful fold: decode every record, then collapse offset commits.

Runs inside ``mapInArrow`` on the executors, one Spark task per Kafka partition range.  All records
of a group live in one `__consumer_offsets` partition, so a task sees every record of its groups
for that range in log order.

Collapsing: for offset-commit records (K=0/1, commits and tombstones) only the **newest** record per
(group, topic, partition) in the range can change the mirror -- the coordinator's own rule is "the
record at the newer log position wins" -- so the older ones are dropped here, in vectorized numpy,
before the rows cross the shuffle into the per-group Python step.  The kept row carries how many
commits (``n_commits``) and tombstones (``n_tombstones``) it stands for, so commit counters stay
exact.  What is lost is only the order of intermediate commits/deletes of one partition within one
micro-batch, which no model output depends on (expiry bases use the newest commit time; an offset
deleted and re-committed in the same batch ends committed either way).

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
    # a run = one (group, topic, partition); its last row (highest log offset) is the one we keep
    starts = np.ones(order.size, dtype=bool)
    starts[1:] = (gs[1:] != gs[:-1]) | (ts[1:] != ts[:-1]) | (ps[1:] != ps[:-1])
    run_starts = np.flatnonzero(starts)
    run_ends = np.append(run_starts[1:], order.size) - 1
    sub_tomb = tomb[commit_idx][order]
    n_tomb = np.add.reduceat(sub_tomb.astype(np.int32), run_starts)
    n_commit = (run_ends - run_starts + 1).astype(np.int32) - n_tomb
    keep_commit = commit_idx[order[run_ends]]

    keep = np.concatenate([np.flatnonzero(~is_commit), keep_commit])
    commits = np.zeros(n, np.int32)
    tombstones = np.zeros(n, np.int32)
    commits[keep_commit] = n_commit
    tombstones[keep_commit] = n_tomb
    keep.sort()  # keep log order within the batch (not needed downstream, but cheap and tidy)
    out = batch.take(pa.array(keep))
    return _with_counts(out, commits[keep], tombstones[keep])


def decode_and_collapse(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: raw Kafka rows in, decoded + collapsed rows (prepared schema) out."""
    from decoders import decode_arrow

    pending: list[pa.RecordBatch] = []
    rows = 0
    for raw in batches:
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
