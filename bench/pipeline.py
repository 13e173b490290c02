"""Pipeline benchmark: the mirror against a real broker preloaded with millions of real commits.

    .venv/bin/python bench/pipeline.py [--records 5000000] [--groups 10000] [--partitions 50]
                                       [--max-offsets-per-trigger N [N ...]]

1. Preload: a local broker (50 partitions of __consumer_offsets, like production) receives
   ``--records`` offset-commit records through real OffsetCommit requests (AdminClient
   alter_consumer_group_offsets: one request per group and round, ``--partitions`` partitions each).
2. (a) Spark's raw read of the topic into a noop sink; (b) the mirror from earliest until caught
   up, once per ``--max-offsets-per-trigger`` value (each on a new checkpoint).  Records/s of both,
   their ratio, peak memory of the Spark JVM and the Python workers, state size.
3. Latency: under a steady commit rate, commit -> visible in ``GET /groups/{id}`` (p50/p99),
   against the trigger interval.
4. 10k groups active in one micro-batch: one commit for each of ``--groups`` groups, all in one
   producer transaction (read_committed makes them visible together), against the running mirror;
   the duration of the batch that folds them.

Figures are printed; nothing is asserted (benchmarks report, tests decide).  The machine is noisy:
compare the ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------------- memory sampler
class RssSampler:
    """Peak resident memory of this process's children: the Spark JVM and the Python workers."""

    def __init__(self) -> None:
        self.peak: dict[str, int] = {"jvm": 0, "python_workers": 0, "driver_python": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _rss(pid: int) -> int:
        from lab.spark_cluster import rss_bytes

        return rss_bytes(pid)

    @staticmethod
    def _children(pid: int) -> list[int]:
        out = []
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    out += [int(c) for c in fh.read().split()]
        except OSError:
            pass
        return out

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.5):
            jvm = workers = 0
            stack = self._children(me)
            while stack:
                pid = stack.pop()
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"java" in cmd and b"kafka.Kafka" not in cmd:
                    jvm += self._rss(pid)
                elif b"pyspark" in cmd or b"python" in cmd:
                    workers += self._rss(pid)
                stack += self._children(pid)
            self.peak["jvm"] = max(self.peak["jvm"], jvm)
            self.peak["python_workers"] = max(self.peak["python_workers"], workers)
            self.peak["driver_python"] = max(self.peak["driver_python"], self._rss(me))

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(5)
        return dict(self.peak)


# ------------------------------------------------------------------------------------------ preload
def preload(bootstrap: str, records: int, groups: int, partitions: int, topics: int) -> int:
    """Real OffsetCommit requests, ``partitions`` partitions each, pipelined."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    names = [f"bench-t{i}" for i in range(topics)]
    for fut in admin.create_topics([NewTopic(t, partitions, 1) for t in names]).values():
        fut.result(60)
    time.sleep(2)
    rounds = max(1, -(-records // (groups * partitions)))
    written = 0
    inflight: list[Any] = []
    started = time.monotonic()
    for r in range(rounds):
        for g in range(groups):
            topic = names[g % topics]
            req = ConsumerGroupTopicPartitions(
                f"bench-g{g}", [TopicPartition(topic, p, 1 + r * 10 + p) for p in range(partitions)]
            )
            inflight.extend(admin.alter_consumer_group_offsets([req], request_timeout=60).values())
            written += partitions
            if len(inflight) >= 2000:
                for fut in inflight:
                    fut.result(120)
                inflight.clear()
        rate = written / (time.monotonic() - started)
        log(f"preload round {r + 1}/{rounds}: {written:,} records, {rate:,.0f}/s")
    for fut in inflight:
        fut.result(120)
    return written


def commit_one(admin: Any, group: str, topic: str, partition: int, offset: int) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, partition, offset)])
    for fut in admin.alter_consumer_group_offsets([req]).values():
        fut.result(30)


# ------------------------------------------------------------------------------------- measurements
def raw_read(spark: Any, bootstrap: str, partitions: list[int], workdir: Path) -> tuple[int, float]:
    import json as _json

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", _json.dumps({"__consumer_offsets": partitions}))
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    started = time.monotonic()
    q = (
        reader.writeStream.format("noop")
        .option("checkpointLocation", str(workdir / "raw-ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    elapsed = time.monotonic() - started
    rows = sum(int(p["numInputRows"]) for p in q.recentProgress)
    return rows, elapsed


def mirror_backfill(
    spark: Any, bootstrap: str, args: argparse.Namespace, per_trigger: int, checkpoint: Path
) -> tuple[Any, dict[str, Any], dict[int, dict[str, int]]]:
    """(b): a mirror on a new checkpoint, from earliest until ready; its figures per batch, and
    the driver-side phases of every batch it runs (kept up to date while it runs)."""
    from streaming.app.mirror import Mirror
    from streaming.settings import load_settings

    settings = load_settings(
        bootstrap_servers=bootstrap,
        checkpoint_location=str(checkpoint),
        trigger_interval_s=args.trigger,
        max_offsets_per_trigger=per_trigger,
        shuffle_partitions=4,
        http_port=0,
    )
    mirror = Mirror(settings, spark=spark)
    started = time.monotonic()
    mirror.start()
    phases: dict[int, dict[str, int]] = {}  # batch id -> where its time went (driver side)
    assert mirror.sink is not None
    mirror.sink.on_batch.append(
        lambda batch_id, rows: phases.__setitem__(
            batch_id,
            {k: getattr(mirror.store.last_batch, k) for k in ("compute_ms", "apply_ms", "write_ms")},
        )
    )
    backlog = sum(mirror.store.readiness.targets.values()) - sum(mirror.store.readiness.starts.values())
    query_started = time.monotonic()
    while not mirror.wait_ready(30):
        log(f"(b) catching up: {100 * mirror.store.readiness.progress():.1f}%")
    elapsed_b = time.monotonic() - query_started
    figures = {
        "max_offsets_per_trigger": per_trigger,
        "records": backlog,
        "seconds_to_ready": round(elapsed_b, 1),
        "seconds_incl_start": round(time.monotonic() - started, 1),
        "records_per_s": round(backlog / elapsed_b),
        "batches": [
            {k: p[k] for k in ("batch_id", "input_rows", "state_rows", "state_bytes")}
            | {"ms": p["duration_ms"].get("triggerExecution")}
            | phases.get(p["batch_id"], {})
            for p in mirror.progress_history
            if p["input_rows"]
        ],
    }
    return mirror, figures, phases


def burst_in_one_transaction(bootstrap: str, groups: int, topics: int) -> None:
    """One offset commit for each of ``groups`` groups, all in a single producer transaction
    (TxnOffsetCommit per group, then EndTxn: the markers make them visible at once)."""
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="bench-burst")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for g in range(groups):
            tp = KTopicPartition(f"bench-t{g % topics}", 0)
            producer.send_offsets_to_transaction({tp: OffsetAndMetadata(99_999, "", -1)}, f"bench-g{g}")
        producer.commit_transaction()
    finally:
        producer.close()


def main() -> int:
    from streaming.settings import Settings

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=50, help="partitions per group (and per topic)")
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--offsets-partitions", type=int, default=50, help="__consumer_offsets partitions")
    ap.add_argument("--trigger", type=float, default=2.0, help="mirror trigger interval, seconds")
    ap.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        nargs="+",
        default=[Settings.model_fields["max_offsets_per_trigger"].default],
        help="(b) once per value, each from a new checkpoint (default: the mirror's default)",
    )
    ap.add_argument("--latency-seconds", type=float, default=60.0)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()

    from confluent_kafka.admin import AdminClient

    from lab.broker import BrokerSettings, LocalKafka
    from streaming.pipeline.session import build_session

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="cm-bench-"))
    broker = LocalKafka(
        BrokerSettings(offsets_topic_num_partitions=args.offsets_partitions, heap="2g"), workdir / "kafka"
    ).start()
    figures: dict[str, Any] = {}
    try:
        t0 = time.monotonic()
        figures["preloaded_records"] = preload(
            broker.bootstrap, args.records, args.groups, args.partitions, args.topics
        )
        figures["preload_seconds"] = round(time.monotonic() - t0, 1)

        sampler = RssSampler().start()
        spark = build_session(
            master="local[2]",
            conf={
                "spark.ui.enabled": "false",
                "spark.driver.memory": "6g",
                "spark.sql.shuffle.partitions": "4",
            },
        )
        partitions = list(range(args.offsets_partitions))
        rows, elapsed = raw_read(spark, broker.bootstrap, partitions, workdir)
        figures["a_raw_read"] = {
            "records": rows,
            "seconds": round(elapsed, 1),
            "records_per_s": round(rows / elapsed),
        }
        log(f"(a) raw read: {rows:,} records in {elapsed:.1f}s = {rows / elapsed:,.0f}/s")

        # (b) once per --max-offsets-per-trigger value, each on a fresh checkpoint; the last
        # mirror stays up for the latency and burst phases
        runs = []
        mirror = None
        for i, per_trigger in enumerate(args.max_offsets_per_trigger):
            if mirror is not None:
                mirror.stop()
            checkpoint = workdir / f"mirror-ckpt-{i}"
            mirror, b, phases = mirror_backfill(spark, broker.bootstrap, args, per_trigger, checkpoint)
            b["ratio_b_over_a"] = round(b["records_per_s"] / figures["a_raw_read"]["records_per_s"], 2)
            runs.append(b)
            log(
                f"(b) mirror, max_offsets_per_trigger={per_trigger:,}: {b['records']:,} records in "
                f"{b['seconds_to_ready']:.1f}s = {b['records_per_s']:,}/s (ratio {b['ratio_b_over_a']})"
            )
        assert mirror is not None
        figures["b_mirror"] = runs
        figures["groups_mirrored"] = len(mirror.store)

        # ---- latency under a steady commit rate
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        base = mirror.http.url
        probe_group = "bench-latency"
        latencies: list[float] = []
        stop = threading.Event()

        def background() -> None:  # steady load on other groups: ~500 commits/s
            i = 0
            while not stop.is_set():
                commit_one(
                    admin,
                    f"bench-g{i % args.groups}",
                    f"bench-t{(i % args.groups) % args.topics}",
                    i % args.partitions,
                    10_000 + i,
                )
                i += 1
                time.sleep(0.002)

        bg = threading.Thread(target=background, daemon=True)
        bg.start()
        deadline = time.monotonic() + args.latency_seconds
        offset = 0
        while time.monotonic() < deadline:
            offset += 1
            committed_at = time.monotonic()
            commit_one(admin, probe_group, "bench-t0", 0, offset)
            while True:
                try:
                    with urllib.request.urlopen(f"{base}/groups/{urllib.parse.quote(probe_group)}") as resp:
                        snap = json.loads(resp.read())
                    if snap["offsets"] and snap["offsets"][0]["offset"] >= offset:
                        latencies.append(time.monotonic() - committed_at)
                        break
                except urllib.error.HTTPError:
                    pass
                time.sleep(0.02)
            time.sleep(0.5)
        stop.set()
        bg.join(10)
        latencies.sort()
        figures["latency"] = {
            "samples": len(latencies),
            "trigger_s": args.trigger,
            "p50_s": round(statistics.median(latencies), 2),
            "p99_s": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 2),
            "max_s": round(latencies[-1], 2),
        }
        log(f"latency commit->API: {figures['latency']}")

        # ---- 10k groups active in one micro-batch, on the running mirror (warm state store).
        # One commit per group inside ONE producer transaction: under read_committed none of them
        # is visible before the commit markers, then all are -- so one trigger sees them together
        # (commits issued one by one would straddle several triggers).
        history_before = len(mirror.progress_history)
        t1 = time.monotonic()
        burst_in_one_transaction(broker.bootstrap, args.groups, args.topics)
        log(f"committed to {args.groups} groups in one transaction in {time.monotonic() - t1:.1f}s")
        deadline = time.monotonic() + 300
        big: list[dict[str, Any]] = []
        while not big and time.monotonic() < deadline:
            time.sleep(0.5)
            big = [
                p for p in list(mirror.progress_history)[history_before:] if p["input_rows"] >= args.groups
            ]
        time.sleep(1)  # the sink hook records the batch's phases right after its progress
        figures["active_groups_batches"] = [
            {
                "batch_id": p["batch_id"],
                "input_rows": p["input_rows"],
                "ms": p["duration_ms"].get("triggerExecution"),
                "addBatch_ms": p["duration_ms"].get("addBatch"),
            }
            | phases.get(p["batch_id"], {})
            for p in big
        ]
        log(f"the micro-batch folding {args.groups} active groups: {figures['active_groups_batches']}")
        figures["peak_rss_bytes"] = sampler.stop()
        mirror.stop()
        spark.stop()
    finally:
        broker.stop()
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
