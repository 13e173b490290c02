"""Benchmark of the batch decoder (decoders.batch) on a capture-shaped dataset, one core.

    .venv/bin/python -m bench.decode [--records N] [--spark-batch ROWS] [--repeat R] [--profile]

Dataset (deterministic, seeded): ~99% offset commits (K=1; realistic group/topic names, mixed
value V3 and V4, ~1/3 of the V4 ones with a topicId, some non-empty and some non-ASCII metadata),
the rest classic group metadata (K=2, consumer groups with members and embedded
subscriptions/assignments) and KIP-848 records (K=3..8), encoded by the lab's encoder
(`lab.encoder`) from our schema tables.  Prints records/s for the whole mix and for offset commits
only, both as one big batch and in Spark-sized batches
(``spark.sql.execution.arrow.maxRecordsPerBatch``, 10k by default), and the peak memory.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import struct
import sys
import time
import tracemalloc

import numpy as np
import pyarrow as pa

from decoders.batch import decode_arrow
from decoders.tables import CONSUMER_ASSIGNMENT, CONSUMER_SUBSCRIPTION, RECORD_TYPES
from lab.encoder import encode_embedded, encode_key, encode_value
from lab.record_samples import sample_struct

T0 = 1_700_000_000_000


def _s16(b: bytes) -> bytes:
    return struct.pack(">h", len(b)) + b


def _names(rng: random.Random) -> tuple[list[bytes], list[bytes]]:
    teams = ["payments", "orders", "analytics", "search", "fraud", "billing", "inventory", "notifications"]
    kinds = ["consumer", "etl", "indexer", "sink", "enricher", "aggregator"]
    envs = ["prod-eu-west-1", "prod-us-east-1", "staging"]
    groups = [
        f"{rng.choice(teams)}-{rng.choice(kinds)}.{rng.choice(envs)}.v{i % 7}".encode() for i in range(5000)
    ]
    groups += [f"connect-sink-{i}".encode() for i in range(200)] + ["grüppe-中文-🙂".encode()]
    topics = [
        f"{rng.choice(teams)}.{rng.choice(['events', 'commands', 'cdc', 'audit'])}.v{i % 3}".encode()
        for i in range(800)
    ]
    return groups, topics


def offset_commits(n: int, rng: random.Random) -> list[tuple[bytes, bytes]]:
    groups, topics = _names(rng)
    topic_ids = [bytes(rng.getrandbits(8) for _ in range(16)) for _ in range(len(topics))]
    rows = []
    for i in range(n):
        g = rng.choice(groups)
        ti = rng.randrange(len(topics))
        key = b"\x00\x01" + _s16(g) + _s16(topics[ti]) + struct.pack(">i", rng.randrange(64))
        off = rng.randrange(1 << 40)
        epoch = rng.randrange(100)
        meta = b"" if rng.random() < 0.95 else ("checkpoint=" + str(i) + ("é" if i % 2 else "")).encode()
        ts = T0 + i
        if rng.random() < 0.5:  # V3: Kafka 2.1 .. 4.0
            value = b"\x00\x03" + struct.pack(">qi", off, epoch) + _s16(meta) + struct.pack(">q", ts)
        else:  # V4: Kafka 4.1+, a third of them with a topicId (tag 0)
            tail = (b"\x01\x00\x10" + topic_ids[ti]) if rng.random() < 0.33 else b"\x00"
            value = (
                b"\x00\x04"
                + struct.pack(">qi", off, epoch)
                + bytes([len(meta) + 1])
                + meta
                + struct.pack(">q", ts)
                + tail
            )
        rows.append((key, value))
    return rows


def other_records(n: int, rng: random.Random) -> list[tuple[bytes, bytes]]:
    """Classic group metadata with consumer members, and KIP-848 records K=3..8."""
    rt2 = RECORD_TYPES[2]
    pool: list[tuple[bytes, bytes]] = []
    for g in range(200):
        members = []
        for m in range(1 + g % 6):
            sub = {
                "topics": [f"orders.events.v{t}" for t in range(1 + m % 3)],
                "userData": None,
                "ownedPartitions": [{"topic": "orders.events.v0", "partitions": list(range(m, 12, 6))}],
                "generationId": g,
                "rackId": None,
            }
            asg = {
                "assignedPartitions": [{"topic": "orders.events.v0", "partitions": list(range(m, 12, 6))}],
                "userData": None,
            }
            members.append(
                {
                    "memberId": f"consumer-{g}-{m}-5f3c1c2e-9b8a-4c1d-8d3e-0a1b2c3d4e5f",
                    "groupInstanceId": None,
                    "clientId": f"consumer-{g}-{m}",
                    "clientHost": f"/10.0.{g % 250}.{m}",
                    "rebalanceTimeout": 300000,
                    "sessionTimeout": 45000,
                    "subscription": encode_embedded(CONSUMER_SUBSCRIPTION, 3, sub),
                    "assignment": encode_embedded(CONSUMER_ASSIGNMENT, 3, asg),
                }
            )
        value = {
            "protocolType": "consumer",
            "generation": g,
            "protocol": "cooperative-sticky",
            "leader": members[0]["memberId"],
            "currentStateTimestamp": T0,
            "members": members,
        }
        pool.append((encode_key(rt2, {"group": f"classic-group-{g}"}), encode_value(rt2, 3, value)))
    for k in (3, 4, 5, 6, 7, 8):
        rt = RECORD_TYPES[k]
        layout = rt.value.layouts[0]
        for i in range(60):
            key = sample_struct(rt.key, 0, False, "full")
            key["GroupId"] = f"kip848-group-{i}"
            variant = "full" if i % 2 else "empty"
            pool.append(
                (encode_key(rt, key), encode_value(rt, 0, sample_struct(layout.struct, 0, True, variant)))
            )
    return [rng.choice(pool) for _ in range(n)]


def dataset(n: int, seed: int = 7) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    rng = random.Random(seed)
    n_other = max(n // 100, 1)
    commits = offset_commits(n - n_other, rng)
    rows = commits + other_records(n_other, rng)
    rng.shuffle(rows)

    def batch(rs: list[tuple[bytes, bytes]]) -> pa.RecordBatch:
        m = len(rs)
        return pa.record_batch(
            {
                "key": pa.array([k for k, _ in rs], pa.binary()),
                "value": pa.array([v for _, v in rs], pa.binary()),
                "partition": pa.array(np.arange(m, dtype=np.int32) % 50),
                "offset": pa.array(np.arange(m, dtype=np.int64)),
                "timestamp": pa.array(
                    (np.arange(m, dtype=np.int64) + T0) * 1000, pa.timestamp("us", tz="UTC")
                ),
            }
        )

    return batch(rows), batch(commits)


def timed(batch: pa.RecordBatch, spark_batch: int | None, repeat: int) -> float:
    """Median seconds to decode ``batch`` (whole, or in slices of ``spark_batch`` rows)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        if spark_batch:
            for lo in range(0, batch.num_rows, spark_batch):
                decode_arrow(batch.slice(lo, spark_batch))
        else:
            decode_arrow(batch)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_memory(batch: pa.RecordBatch, spark_batch: int | None) -> dict[str, float]:
    """Peak bytes while decoding ``batch`` (whole or in Spark-sized slices): numpy/Python via
    tracemalloc, Arrow via a fresh proxy memory pool made the default for the duration."""
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    tracemalloc.start()
    try:
        if spark_batch:
            for lo in range(0, batch.num_rows, spark_batch):
                decode_arrow(batch.slice(lo, spark_batch))
        else:
            out = decode_arrow(batch)
            del out
        _, py_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)
    return {"numpy_mb": py_peak / 1e6, "arrow_mb": pool.max_memory() / 1e6}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--spark-batch", type=int, default=10_000, help="rows per Spark Arrow batch")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", choices=["mix", "commits"], help="cProfile one run of that dataset")
    args = ap.parse_args(argv)

    pa.set_cpu_count(1)  # one core: no Arrow thread pool
    pa.set_io_thread_count(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    t0 = time.perf_counter()
    mix, commits = dataset(args.records)
    built = time.perf_counter() - t0
    print(f"dataset: {mix.num_rows:,} records ({commits.num_rows:,} offset commits), built in {built:.1f}s")
    decode_arrow(mix.slice(0, 20_000))  # warm-up: compile plans, import lazies

    res = decode_arrow(mix)
    statuses = res.column("status").value_counts().to_pylist()
    print("status counts:", {d["values"]: d["counts"] for d in statuses})

    for label, batch in (("mix (99% offset commits)", mix), ("offset commits only", commits)):
        whole = timed(batch, None, args.repeat)
        sliced = timed(batch, args.spark_batch, args.repeat)
        print(
            f"{label:26s}: {batch.num_rows / whole:12,.0f} records/s one batch | "
            f"{batch.num_rows / sliced:12,.0f} records/s in {args.spark_batch:,}-row batches"
        )

    input_mb = sum(b.size for col in mix.columns for b in col.buffers() if b is not None) / 1e6
    for label, size in (("one batch", None), (f"{args.spark_batch:,}-row batches", args.spark_batch)):
        mem = peak_memory(mix, size)
        print(
            f"peak memory decoding {mix.num_rows:,} records ({label}): numpy/Python {mem['numpy_mb']:.0f} MB "
            f"+ Arrow {mem['arrow_mb']:.0f} MB (input batch itself: {input_mb:.0f} MB)"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    print(f"process max RSS (dataset building included): {rss:.0f} MB")

    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        target = mix if args.profile == "mix" else commits
        prof.enable()
        decode_arrow(target)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
