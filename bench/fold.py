"""Benchmark of the state fold's batch path (state.fold.fold_columns), one core.

    .venv/bin/python -m bench.fold [--groups 10000] [--partitions 50] [--commits 1] [--batches 3]
                                   [--profile]

Dataset (deterministic): ``--groups`` consumer groups, each committing ``--partitions`` partitions
(over 1-5 topics, a third of the commits with a topic id, a few with metadata) ``--commits`` times
per micro-batch.  Input: what the streaming job hands the fold -- the group's rows (the prepared
columns of `decoders.columns`) packed by `streaming.pipeline.prepare.pack_groups`, timed from
unpacking to the folded state.

Each micro-batch folds every group's rows into its state (the first batch creates the groups; the
next ones update 100% of their offsets) and, like the adapter, encodes every touched group with the
state codec.  Prints offset-commit records/s for the fold alone and fold+encode, the state bytes
per group and per committed offset, and the peak memory (max RSS; ``--trace-memory`` adds a
tracemalloc figure, at ~10x the run time).  Times are CPU time of this process
(``time.process_time``): the machine is shared, and wall-clock figures swing with other load.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import time
import tracemalloc

import numpy as np
import pyarrow as pa

from state.codec import decode, encode
from state.fold import fold_columns
from state.model import Group
from streaming.pipeline.prepare import pack_groups, prepared_schema, unpack_group

T0 = 1_790_000_000_000
TOPIC_IDS = [f"{i:02d}AAAAAAAAAAAAAAAAAAAA"[:22] for i in range(64)]


def group_batches(n_groups: int, *, n_parts: int, commits: int, batch: int) -> list[pa.RecordBatch]:
    """One prepared batch (`prepared_schema`) per group for micro-batch number ``batch``."""
    schema = prepared_schema()
    out = []
    rows = n_parts * commits
    for gi in range(n_groups):
        n_topics = 1 + gi % 5
        topics = [f"team-{gi % 97}.events.t{j}" for j in range(n_topics)]
        tp_topic = [topics[p % n_topics] for p in range(n_parts)] * commits
        tp_part = [p // n_topics for p in range(n_parts)] * commits
        base_off = batch * rows
        ts = T0 + batch * 60_000 + np.arange(rows, dtype=np.int64) * 3
        cols: dict[str, object] = {
            "status": ["ok"] * rows,
            "record_type": np.ones(rows, dtype=np.int16),
            "value_version": np.full(rows, 4, dtype=np.int16),
            "group_id": [f"group-{gi}"] * rows,
            "topic": tp_topic,
            "partition_num": np.array(tp_part, dtype=np.int32),
            "is_tombstone": np.zeros(rows, dtype=bool),
            "committed_offset": np.arange(rows, dtype=np.int64) + 1_000_000 * (batch + 1),
            "leader_epoch": [None] * rows if gi % 2 else np.full(rows, 7, dtype=np.int32),
            "metadata": [None if gi % 10 else "m"] * rows,
            "commit_timestamp_ms": ts,
            "topic_id": [TOPIC_IDS[hash(t) % 64] for t in tp_topic] if gi % 3 == 0 else [None] * rows,
            "ambiguous_layout": np.zeros(rows, dtype=bool),
            "source_partition": np.full(rows, gi % 50, dtype=np.int32),
            "source_offset": np.arange(base_off, base_off + rows, dtype=np.int64) + gi * 1_000_000,
            "source_timestamp_ms": ts,
            "n_commits": np.ones(rows, np.int32),
            "n_tombstones": np.zeros(rows, np.int32),
        }
        arrays = [
            pa.array(cols[f.name], f.type) if f.name in cols else pa.nulls(rows, f.type) for f in schema
        ]
        out.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
    return out


def packed(batches: list[pa.RecordBatch]) -> list[tuple[str, bytes]]:
    """The groups as the streaming job's mapInArrow step ships them: packed per group."""
    out = []
    for batch in batches:
        packed_batch = pack_groups(batch)
        ids, blobs = packed_batch.column("group_id").to_pylist(), packed_batch.column("packed").to_pylist()
        out += zip(ids, blobs, strict=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--commits", type=int, default=1, help="commits per partition per micro-batch")
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--trace-memory", action="store_true", help="tracemalloc the run (slows the fold ~10x)")
    args = ap.parse_args()
    print(
        f"fold bench: {args.groups} groups x {args.partitions} partitions x {args.commits} commit(s)"
        f" per micro-batch, {args.batches} micro-batches, packed groups, one core"
    )
    states: dict[str, bytes] = {}
    groups: dict[str, Group | None] = {}
    fold_s = 0.0
    encode_s = 0.0
    rows_total = 0
    tracemalloc.start() if args.trace_memory else None
    for b in range(args.batches):
        batches = group_batches(args.groups, n_parts=args.partitions, commits=args.commits, batch=b)
        rows = sum(f.num_rows for f in batches)
        blobs = packed(batches)
        prof = cProfile.Profile() if args.profile and b == args.batches - 1 else None
        if prof:
            prof.enable()
        t0 = time.process_time()
        for gid, blob in blobs:
            cols = unpack_group(blob)
            cols["group_id"] = [gid] * len(cols["status"])
            groups[gid] = fold_columns(groups.get(gid), cols).group
        t1 = time.process_time()
        for gid, g in groups.items():
            if g is not None:
                states[gid] = encode(g)
        t2 = time.process_time()
        if prof:
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        fold_s += t1 - t0
        encode_s += t2 - t1
        rows_total += rows
        print(
            f"  batch {b}: {rows:,} commit rows  fold {rows / (t1 - t0):,.0f} rec/s"
            f"  fold+encode {rows / (t2 - t0):,.0f} rec/s"
        )
        del batches, blobs
    peak = tracemalloc.get_traced_memory()[1] if args.trace_memory else 0
    tracemalloc.stop()
    n_offsets = sum(len(g.offsets) for g in groups.values() if g is not None)
    total_bytes = sum(len(v) for v in states.values())
    # decode cost (the adapter reads each touched state once per micro-batch)
    t0 = time.process_time()
    for blob in states.values():
        decode(blob)
    dec_s = time.process_time() - t0
    print(f"fold:          {rows_total / fold_s:,.0f} offset-commit records/s")
    print(f"fold+encode:   {rows_total / (fold_s + encode_s):,.0f} records/s")
    print(f"decode:        {len(states) / dec_s:,.0f} groups/s ({dec_s / len(states) * 1e6:.1f} us/group)")
    per_group = total_bytes / len(states)
    print(f"state bytes:   {per_group:,.0f} per group, {total_bytes / n_offsets:.1f} per committed offset")
    print(
        f"peak memory:   {peak / 2**20:,.0f} MiB traced (state + one micro-batch of packed groups), "
        f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
