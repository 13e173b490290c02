"""Benchmark of the state fold's batch path (state.fold.fold_columns / fold_frame), one core.

    .venv/bin/python bench/fold.py [--groups 10000] [--partitions 50] [--commits 1] [--batches 3]
                                   [--flavour packed|spark|decoders] [--profile]

Dataset (deterministic): ``--groups`` consumer groups, each committing ``--partitions`` partitions
(over 1-5 topics, a third of the commits with a topic id, a few with metadata) ``--commits`` times
per micro-batch.  Input flavours: ``packed`` (default; what the streaming job hands the fold: the
group's rows packed by `streaming.pipeline.prepare.pack_groups`, timed from unpacking to the folded
state), and one pandas frame per group shaped like ``decoders.OUTPUT_SCHEMA`` -- ``spark`` (what
PySpark's Arrow->pandas conversion produces: numpy int64/int32, float64 with NaN for nullable ints
that hold nulls, object strings) or ``decoders`` (``decode_pandas``'s nullable extension dtypes).

Each micro-batch folds every group's frame into its state (the first batch creates the groups; the
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
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

from state.codec import decode, encode  # noqa: E402
from state.fold import fold_columns, fold_frame  # noqa: E402
from state.model import Group  # noqa: E402
from streaming.pipeline.prepare import pack_groups, prepared_schema, unpack_group  # noqa: E402

T0 = 1_790_000_000_000
TOPIC_IDS = [f"{i:02d}AAAAAAAAAAAAAAAAAAAA"[:22] for i in range(64)]


def group_frames(
    n_groups: int, *, n_parts: int, commits: int, batch: int, flavour: str, rng: random.Random
) -> list[pd.DataFrame]:
    """One OUTPUT_SCHEMA-shaped frame per group for micro-batch number ``batch``."""
    frames = []
    rows = n_parts * commits
    for gi in range(n_groups):
        n_topics = 1 + gi % 5
        topics = [f"team-{gi % 97}.events.t{j}" for j in range(n_topics)]
        tp_topic = [topics[p % n_topics] for p in range(n_parts)] * commits
        tp_part = [p // n_topics for p in range(n_parts)] * commits
        base_off = batch * rows
        src_off = np.arange(base_off, base_off + rows, dtype=np.int64) + gi * 1_000_000
        ts = T0 + batch * 60_000 + np.arange(rows, dtype=np.int64) * 3
        with_id = gi % 3 == 0
        cols: dict[str, object] = {
            "status": np.full(rows, "ok", dtype=object),
            "record_type": np.ones(rows, dtype=np.int16),
            "value_version": np.full(rows, 4, dtype=np.int16),
            "group_id": np.full(rows, f"group-{gi}", dtype=object),
            "topic": np.array(tp_topic, dtype=object),
            "partition_num": np.array(tp_part, dtype=np.int32),
            "member_id": np.full(rows, None, dtype=object),
            "is_tombstone": np.zeros(rows, dtype=bool),
            "committed_offset": np.arange(rows, dtype=np.int64) + 1_000_000 * (batch + 1),
            "leader_epoch": np.full(rows, np.nan) if gi % 2 else np.full(rows, 7, dtype=np.int32),
            "metadata": np.full(rows, None if gi % 10 else "m", dtype=object),
            "commit_timestamp_ms": ts,
            "expire_timestamp_ms": np.full(rows, np.nan),
            "topic_id": np.array([TOPIC_IDS[hash(t) % 64] for t in tp_topic], dtype=object)
            if with_id
            else np.full(rows, None, dtype=object),
            "payload": np.full(rows, None, dtype=object),
            "ambiguous_layout": np.zeros(rows, dtype=bool),
            "error_part": np.full(rows, None, dtype=object),
            "error_field": np.full(rows, None, dtype=object),
            "error_position": np.full(rows, np.nan),
            "error_reason": np.full(rows, None, dtype=object),
            "source_partition": np.full(rows, gi % 50, dtype=np.int32),
            "source_offset": src_off,
            "source_timestamp_ms": ts,
        }
        df = pd.DataFrame(cols)
        if flavour == "spark":
            # what PySpark hands a pandas UDF: Arrow -> pandas (numpy dtypes, consolidated blocks)
            df = pa.Table.from_pandas(df, preserve_index=False).to_pandas()
        if flavour == "decoders":
            for name in ("leader_epoch", "partition_num"):
                df[name] = df[name].astype("Int32")
            for name in ("record_type", "value_version"):
                df[name] = df[name].astype("Int16")
            for name in (
                "committed_offset",
                "commit_timestamp_ms",
                "expire_timestamp_ms",
                "source_offset",
                "source_timestamp_ms",
            ):
                df[name] = df[name].astype("Int64")
            df["error_position"] = df["error_position"].astype("Int32")
            df["source_partition"] = df["source_partition"].astype("Int32")
            df["is_tombstone"] = df["is_tombstone"].astype("boolean")
        frames.append(df)
    return frames


def packed(frames: list[pd.DataFrame]) -> list[tuple[str, bytes]]:
    """The frames as the streaming job's mapInArrow step ships them: packed per group."""
    schema = prepared_schema()
    out = []
    for frame in frames:
        counted = frame.assign(
            n_commits=np.ones(len(frame), np.int32), n_tombstones=np.zeros(len(frame), np.int32)
        )
        batch = pa.RecordBatch.from_pandas(counted[schema.names], schema=schema, preserve_index=False)
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
    ap.add_argument("--flavour", choices=["packed", "spark", "decoders"], default="packed")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--trace-memory", action="store_true", help="tracemalloc the run (slows the fold ~10x)")
    args = ap.parse_args()
    rng = random.Random(7)
    print(
        f"fold bench: {args.groups} groups x {args.partitions} partitions x {args.commits} commit(s)"
        f" per micro-batch, {args.batches} micro-batches, {args.flavour} column types, one core"
    )
    states: dict[str, bytes] = {}
    groups: dict[str, Group | None] = {}
    fold_s = 0.0
    encode_s = 0.0
    rows_total = 0
    tracemalloc.start() if args.trace_memory else None
    for b in range(args.batches):
        frames = group_frames(
            args.groups,
            n_parts=args.partitions,
            commits=args.commits,
            batch=b,
            flavour="spark" if args.flavour == "packed" else args.flavour,
            rng=rng,
        )
        rows = sum(len(f) for f in frames)
        blobs = packed(frames) if args.flavour == "packed" else []
        prof = cProfile.Profile() if args.profile and b == args.batches - 1 else None
        if prof:
            prof.enable()
        t0 = time.process_time()
        if blobs:
            for gid, blob in blobs:
                cols = unpack_group(blob)
                cols["group_id"] = [gid] * len(cols["status"])
                groups[gid] = fold_columns(groups.get(gid), cols).group
        else:
            for gi, df in enumerate(frames):
                gid = f"group-{gi}"
                groups[gid] = fold_frame(groups.get(gid), df).group
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
        del frames
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
        f"peak memory:   {peak / 2**20:,.0f} MiB traced (state + one micro-batch of frames), "
        f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
