"""Pipeline benchmark: the mirror against a real broker preloaded with millions of real commits.

    .venv/bin/python -m bench.pipeline [--records 5000000] [--groups 10000] [--partitions 50]
                                       [--max-offsets-per-trigger N [N ...]]

1. Preload: a local broker (50 partitions of __consumer_offsets, like production) receives
   ``--records`` offset-commit records through real OffsetCommit requests (AdminClient
   alter_consumer_group_offsets: one request per group and round, ``--partitions`` partitions each).
2. (0) the floor: a plain confluent-kafka consumer reading the same records from earliest to the
   end offsets and doing nothing else (the physical floor of reading that topic on this machine);
   (a) Spark's raw read of the topic into a noop sink; (b) the mirror from earliest until caught
   up, once per ``--max-offsets-per-trigger`` value (each on a new checkpoint, the backfill folded
   as ``--backfill`` says, default the mirror's): ``Mirror.start`` in the running session ->
   ready, against the floor (until 2026-11-27 from the query's start: the driver's backfill is
   folded before the query starts).  Records/s, ratios, peak memory of the Spark JVM and the Python
   workers, state size.
3. (p) process start -> ``/ready``: ``coordinator-mirror run`` as its own process on a new
   checkpoint (JVM start, session, jars, query, backfill), polled over HTTP.
4. Latency: a commit made right after ready (while a new checkpoint's seed batch runs) until
   ``GET /groups/{id}`` shows it; then under a steady commit rate (``--latency-rate`` commits/s
   spread over every group), commit -> visible in ``GET /groups/{id}`` (p50/p99), against the
   trigger interval.  ``--preview off`` for the mirror without the preview (A/B runs).
5. Active groups in one micro-batch: one commit for each of ``--burst-groups`` groups, all in one
   producer transaction (read_committed makes them visible together), against the running mirror;
   the duration of the batch that folds them, against applyInPandasWithState's own floor for as
   many groups (bench/stateful_floor.py's no-op function, 2 columns, existing state) measured in
   the same Spark session.
6. ``--insights`` (issue 26): a share consumer accepting ``--share-rate`` records/s (the share
   coordinator writes a ShareUpdate per acknowledgement batch) beside the commit load; the latency
   probe of 4. twice on the backfilled checkpoint -- the mirror with the `__share_group_state` query
   and the timeline off, then on -- and the share query's own batches.  ``--only-insights`` skips
   (p), the raw read and 5.

Figures are printed; nothing is asserted (benchmarks report, tests decide).  The machine is noisy:
compare the ratios measured in one run.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
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

from lab.preload import floor_read, preload  # the preload and the floor (bench/readiness.py too)
from lab.proc import tree_pids


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

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.5):
            jvm = workers = 0
            for pid in tree_pids(me)[1:]:  # every descendant
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"java" in cmd and b"kafka.Kafka" not in cmd:
                    jvm += self._rss(pid)
                elif b"pyspark" in cmd or b"python" in cmd:
                    workers += self._rss(pid)
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
def commit_one(admin: Any, group: str, topic: str, partition: int, offset: int) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, partition, offset)])
    for fut in admin.alter_consumer_group_offsets([req]).values():
        fut.result(30)


# ------------------------------------------------------------------------------------- measurements
def process_to_ready(bootstrap: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """(p): ``coordinator-mirror run`` as a process of its own on a new checkpoint: seconds from
    the process's start to ``/ready`` answering 200."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        str(Path(sys.executable).with_name("coordinator-mirror")),
        "run",
        "--bootstrap-servers",
        bootstrap,
        "--checkpoint-location",
        str(workdir / "process-ckpt"),
        "--http-port",
        str(port),
        "--trigger-interval-s",
        str(args.trigger),
        "--log-level",
        "WARNING",
    ]
    log_path = workdir / "process-run.log"
    started = time.monotonic()
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            ready_s = None
            while proc.poll() is None and time.monotonic() - started < 600:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2) as resp:
                        if resp.status == 200:
                            ready_s = time.monotonic() - started
                            break
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    pass
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(60)
    if ready_s is None:
        raise RuntimeError(f"the mirror process never became ready; see {log_path}")
    return {"seconds_process_start_to_ready": round(ready_s, 1)}


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
        **({"backfill": args.backfill} if args.backfill else {}),
        preview=args.preview == "on",
    )
    mirror = Mirror(settings, spark=spark)
    started = time.monotonic()
    mirror.start()
    phases: dict[int, dict[str, int]] = {}  # batch id -> where its time went (driver side)
    assert mirror.sink is not None
    mirror.sink.on_batch.append(
        lambda batch_id, rows: phases.__setitem__(
            batch_id,
            {k: getattr(mirror.status.last_batch, k) for k in ("compute_ms", "apply_ms", "write_ms")},
        )
    )
    backlog = sum(mirror.status.targets().values()) - sum(mirror.status.starts().values())
    query_started = time.monotonic()
    while not mirror.wait_ready(30):
        log(f"(b) catching up: {100 * mirror.status.view().progress:.1f}%")
    # from Mirror.start (the session already up): with ``backfill: driver`` the backfill is
    # folded inside start, before the query starts, so "from the query's start" measures nothing
    elapsed_b = time.monotonic() - started
    figures = {
        "max_offsets_per_trigger": per_trigger,
        "backfill": settings.backfill,
        "records": backlog,
        "seconds_to_ready": round(elapsed_b, 1),
        "seconds_from_query_start": round(time.monotonic() - query_started, 1),
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


def _spawn() -> Any:
    """Child processes start fresh ("spawn"): this process runs a JVM bridge and many threads."""
    import multiprocessing

    return multiprocessing.get_context("spawn")


def background_load(
    bootstrap: str, groups: int, partitions: int, topics: int, rate: float, *, stop: Any, sent: Any
) -> None:
    """Steady commits spread over every group, ``rate`` a second, until ``stop`` is set (runs in
    a child process; ``sent`` counts them)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    inflight: list[Any] = []
    began = time.monotonic()
    n = 0
    while not stop.is_set():
        due = int((time.monotonic() - began) * rate)
        while n < due:
            g = (n * 7919) % groups
            req = ConsumerGroupTopicPartitions(
                f"bench-g{g}", [TopicPartition(f"bench-t{g % topics}", n % partitions, 10_000 + n)]
            )
            inflight.extend(admin.alter_consumer_group_offsets([req]).values())
            n += 1
            sent.value = n
        if len(inflight) > 1000:
            for fut in inflight:
                fut.result(60)
            inflight.clear()
        time.sleep(0.01)
    for fut in inflight:
        fut.result(60)


class GcPauses:
    """The driver interpreter's garbage-collector pauses from now to `stop`, per generation (a
    full collection walks every tracked object: its cost grows with what the driver holds)."""

    def __init__(self) -> None:
        import gc

        self._gc = gc
        self._started: float | None = None
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        #: CPU the collecting thread used in them (walking objects, with the GIL held); the rest
        #: of a pause is waiting, e.g. py4j's finalizers telling the JVM an object is gone
        self.cpu = {0: 0.0, 1: 0.0, 2: 0.0}
        self._started_cpu = 0.0
        #: the longest collections: (s, generation, objects collected)
        self.longest: list[tuple[float, int, int]] = []
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            self._started_cpu = time.thread_time()
        elif self._started is not None:
            took = time.perf_counter() - self._started
            self.pauses[info["generation"]].append(took)
            self.cpu[info["generation"]] += time.thread_time() - self._started_cpu
            self.longest.append((took, info["generation"], info["collected"]))
            self.longest = sorted(self.longest, reverse=True)[:5]

    def stop(self) -> dict[str, Any]:
        self._gc.callbacks.remove(self._callback)
        out: dict[str, Any] = {
            f"gen{g}": {
                "collections": len(p),
                "total_ms": round(sum(p) * 1000),
                "max_ms": round(max(p, default=0) * 1000),
                "cpu_ms": round(self.cpu[g] * 1000),
            }
            for g, p in self.pauses.items()
        }
        out["longest"] = [{"ms": round(t * 1000), "gen": g, "collected": n} for t, g, n in self.longest]
        tracked = self._gc.get_objects()
        out["tracked_objects"] = len(tracked)
        out["top_types"] = dict(collections.Counter(type(o).__name__ for o in tracked).most_common(8))
        return out


def measure_latency(mirror: Any, bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    """Under ``--latency-rate`` background commits/s spread over every group: commit -> visible
    in ``GET /groups/{id}`` for a probe group, and the median phases of the batches meanwhile."""
    from confluent_kafka.admin import AdminClient

    from streaming.serving.catalogue import PREVIEW_DELAY_BUCKETS

    figures: dict[str, Any] = {}
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    base = mirror.http.url
    probe_group = "bench-latency"
    # a commit made right after ready (the mirror has just become ready: the seed batch runs)
    waited = time.monotonic()
    commit_one(admin, probe_group, "bench-t0", 0, 1)
    while not _visible(base, probe_group, 1):
        time.sleep(0.02)
    commit_after_ready_visible_s = round(time.monotonic() - waited, 2)
    # a new checkpoint's first batch (with the driver's backfill: the seed batch, which runs after
    # ready) is not the steady state: the load starts once it is committed, and how long after
    # ready that was is reported
    while mirror.status.last_batch.batch_id < 0:
        time.sleep(0.1)
    first_batch_after_ready_s = round(time.monotonic() - waited, 1)
    latencies: list[float] = []
    # the load runs in a process of its own: librdkafka's coordinator-request path has a
    # use-after-free under a fan-out of AdminClient requests (librdkafka#4605, fix PR #5397 not
    # released), and a heap it corrupts brings down whichever client runs next -- in the bench's
    # process that was the mirror's own (two 100k-group runs died in its ListGroups parse)
    stop_load = _spawn().Event()
    sent = _spawn().Value("q", 0)

    load = _spawn().Process(
        target=background_load,
        args=(bootstrap, args.groups, args.partitions, args.topics, args.latency_rate),
        kwargs={"stop": stop_load, "sent": sent},
        name="bench-load",
        daemon=True,
    )
    load.start()
    bg_started = time.monotonic()
    # steady state: the load runs a while before the probe starts (the first micro-batches after a
    # backfill also pay the state store's maintenance of the backfill's changes)
    time.sleep(getattr(args, "latency_warmup", 15.0))
    history_latency = len(mirror.progress_history)
    deadline = time.monotonic() + args.latency_seconds
    offset = 1
    while time.monotonic() < deadline:
        offset += 1
        committed_at = time.monotonic()
        commit_one(admin, probe_group, "bench-t0", 0, offset)
        while not _visible(base, probe_group, offset):
            time.sleep(0.02)
        latencies.append(time.monotonic() - committed_at)
        time.sleep(0.5)
    stop_load.set()
    load.join(60)
    if load.exitcode != 0:
        raise RuntimeError(f"the background load process exited with {load.exitcode}")
    latencies.sort()
    figures["latency"] = {
        "background_commits_per_s": round(sent.value / (time.monotonic() - bg_started)),
        "samples": len(latencies),
        "trigger_s": mirror.settings.trigger_interval_s,
        "p50_s": round(statistics.median(latencies), 2),
        "p99_s": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 2),
        "max_s": round(latencies[-1], 2),
        "first_batch_after_ready_s": first_batch_after_ready_s,
        "commit_after_ready_visible_s": commit_after_ready_visible_s,
        "preview": mirror.settings.preview,
        "preview_groups": dict(mirror.store.preview_counts),
        "preview_delay_buckets": dict(
            zip(map(str, PREVIEW_DELAY_BUCKETS), mirror.store.preview_delay()[0], strict=True)
        )
        | {"count": mirror.store.preview_delay()[2]},
    }
    steady = [p for p in list(mirror.progress_history)[history_latency:] if p["input_rows"]]
    slow = [p for p in steady if p["duration_ms"].get("triggerExecution", 0) > 3000]
    if slow:
        figures["latency"]["slow_batches"] = [
            {"batch_id": p["batch_id"], "input_rows": p["input_rows"]} | p["duration_ms"] for p in slow
        ]
    if steady:
        keys = sorted({k for p in steady for k in p["duration_ms"]})
        figures["latency"]["batch_ms_median"] = {
            k: statistics.median(p["duration_ms"].get(k, 0) for p in steady) for k in keys
        } | {"input_rows": statistics.median(p["input_rows"] for p in steady), "batches": len(steady)}
    log(f"latency commit->API: {figures['latency']}")

    return figures["latency"]  # type: ignore[no-any-return]


def _visible(base: str, group: str, offset: int) -> bool:
    """``GET /groups/{group}`` shows ``offset`` (or a later one) for its first partition."""
    try:
        with urllib.request.urlopen(f"{base}/groups/{urllib.parse.quote(group)}") as resp:
            snap = json.loads(resp.read())
    except urllib.error.HTTPError:
        return False
    return bool(snap["offsets"]) and snap["offsets"][0]["offset"] >= offset


def share_load(bootstrap: str, rate: float, *, stop: Any, sent: Any) -> None:
    """A share group reading ``bench-share`` (2 partitions): ``rate`` records/s produced, each
    accepted by a ShareConsumer (implicit acknowledgement: accepted at the next poll) -- a child
    process until ``stop`` is set; ``sent`` counts records consumed."""
    from confluent_kafka import Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for fut in admin.create_topics([NewTopic("bench-share", 2, 1)]).values():
        with contextlib.suppress(Exception):  # already there (a second run of the phase)
            fut.result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5})
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "bench-share", "log_level": 0})
    consumer.subscribe(["bench-share"])
    began = time.monotonic()
    n = 0
    while not stop.is_set():
        due = int((time.monotonic() - began) * rate)
        while n < due:
            producer.produce("bench-share", value=b"x", partition=n % 2)
            n += 1
        producer.poll(0)
        for msg in consumer.poll(0.05) or []:
            if msg.error() is None:
                sent.value += 1
    producer.flush(30)
    consumer.close()


def measure_insights(
    spark: Any, bootstrap: str, args: argparse.Namespace, checkpoint: Path
) -> dict[str, Any]:
    """6.: the latency probe with the share-state query and the timeline off, then on, on the
    backfilled checkpoint, under the commit load and a share consumer's acknowledgements."""
    from streaming.app.mirror import Mirror
    from streaming.settings import load_settings

    stop_share = _spawn().Event()
    consumed = _spawn().Value("q", 0)
    load = _spawn().Process(
        target=share_load, args=(bootstrap, args.share_rate), kwargs={"stop": stop_share, "sent": consumed},
        name="bench-share", daemon=True,
    )  # fmt: skip
    load.start()
    out: dict[str, Any] = {"share_rate": args.share_rate}
    try:
        for label, on in (("off", False), ("on", True)):
            settings = load_settings(
                bootstrap_servers=bootstrap,
                checkpoint_location=str(checkpoint),
                trigger_interval_s=args.trigger,
                shuffle_partitions=4,
                http_port=0,
                share_state_enabled=on,
                timeline_events_per_group=50 if on else 0,
            )
            mirror = Mirror(settings, spark=spark).start()
            try:
                while not mirror.wait_ready(30):
                    log(f"(i) {label}: catching up")
                if on:  # the share query runs (its topic exists once the share group fetched)
                    deadline = time.monotonic() + 120
                    while not len(mirror.share_store) and time.monotonic() < deadline:
                        time.sleep(1)
                before = consumed.value
                figures = measure_latency(mirror, bootstrap, args)
                figures["share_records_consumed_per_s"] = round(
                    (consumed.value - before) / (args.latency_seconds + args.latency_warmup)
                )
                if on and mirror.share_state is not None and mirror.share_state.query is not None:
                    progress = [json.loads(p.json) for p in mirror.share_state.query.recentProgress]
                    busy = [p for p in progress if p["numInputRows"]]
                    figures["share_query"] = {
                        "batches": len(busy),
                        "input_rows": sum(p["numInputRows"] for p in busy),
                        "batch_ms_median": statistics.median(
                            p["durationMs"]["triggerExecution"] for p in busy
                        )
                        if busy
                        else None,
                        "share_groups": len(mirror.share_store),
                        "records": dict(mirror.share_store.records),
                    }
                    figures["timeline_groups"] = len(mirror.store.timeline)
                out[label] = figures
            finally:
                mirror.stop()
    finally:
        stop_share.set()
        load.join(60)
    off, on_ = out["off"], out["on"]
    out["ratio_on_over_off"] = {
        "p50": round(on_["p50_s"] / off["p50_s"], 2),
        "p99": round(on_["p99_s"] / off["p99_s"], 2),
        "batch_ms_median": round(
            on_["batch_ms_median"]["triggerExecution"] / off["batch_ms_median"]["triggerExecution"], 2
        ),
    }
    log(f"(i) insights on vs off: {out['ratio_on_over_off']}")
    return out


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
    import faulthandler

    from streaming.settings import Settings

    # the bench's process holds the mirror and librdkafka clients of its own: a crash in native
    # code prints every Python thread's stack (two 100k-group runs died of a segfault in
    # librdkafka's main thread with nothing but a dmesg line)
    faulthandler.enable(all_threads=True)

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=50, help="partitions per group (and per topic)")
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--offsets-partitions", type=int, default=50, help="__consumer_offsets partitions")
    ap.add_argument(
        "--trigger",
        type=float,
        default=Settings.model_fields["trigger_interval_s"].default,
        help="mirror trigger interval, seconds (default: the mirror's)",
    )
    ap.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        nargs="+",
        default=[Settings.model_fields["max_offsets_per_trigger"].default],
        help="(b) once per value, each from a new checkpoint (default: the mirror's default)",
    )
    ap.add_argument("--latency-seconds", type=float, default=60.0)
    ap.add_argument("--latency-rate", type=float, default=500.0, help="background commits/s")
    ap.add_argument("--latency-warmup", type=float, default=15.0, help="load before the probe, s")
    ap.add_argument("--burst-groups", type=int, default=None, help="default: min(--groups, 10000)")
    ap.add_argument("--skip-process", action="store_true", help="skip (p), process start -> ready")
    ap.add_argument("--backfill", choices=("driver", "query"), default=None, help="(b): default the mirror's")
    ap.add_argument("--insights", action="store_true", help="6.: share-state query and timeline off vs on")
    ap.add_argument("--only-insights", action="store_true", help="skip (p), (a) and 5.; implies --insights")
    ap.add_argument("--only-latency", action="store_true", help="skip (a), (p), 5. and 6.: (b) and 4. only")
    ap.add_argument("--share-rate", type=float, default=200.0, help="6.: share records/s accepted")
    ap.add_argument(
        "--driver-heap-freeze",
        choices=("on", "off"),
        default="on",
        help="off: the mirror's driver heap is never frozen (streaming.app.heap), for A/B runs",
    )
    ap.add_argument(
        "--spark-gc",
        choices=("default", "g1"),
        default="default",
        help="g1: the Spark JVM on G1, not the local-mode default (the serial collector), for A/B runs",
    )
    ap.add_argument(
        "--preview", choices=("on", "off"), default="on", help="the setting preview (off: for A/B runs)"
    )
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    if args.driver_heap_freeze == "off":
        from streaming.app.heap import DriverHeap

        DriverHeap.step = lambda self, now: None  # type: ignore[method-assign,assignment]

    from lab.broker import BrokerSettings, LocalKafka
    from streaming.pipeline.session import build_session

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="cm-bench-"))
    broker = LocalKafka(
        BrokerSettings(offsets_topic_num_partitions=args.offsets_partitions, heap="2g"), workdir / "kafka"
    ).start()
    figures: dict[str, Any] = {}
    try:
        t0 = time.monotonic()
        with _spawn().Pool(1) as pool:  # a child process, for the reason in `measure_latency`
            figures["preloaded_records"] = pool.apply(
                preload, (broker.bootstrap, args.records, args.groups, args.partitions, args.topics)
            )
        figures["preload_seconds"] = round(time.monotonic() - t0, 1)

        sampler = RssSampler().start()
        spark = build_session(
            master="local[2]",
            conf={
                "spark.ui.enabled": "false",
                "spark.driver.memory": "6g",
                "spark.sql.shuffle.partitions": "4",
                # the mirror's own choice (streaming.pipeline.session.gc_conf) unless g1 is asked for
                **({"spark.driver.extraJavaOptions": "-XX:+UseG1GC"} if args.spark_gc == "g1" else {}),
            },
        )
        partitions = list(range(args.offsets_partitions))
        floor_rows, floor_s = floor_read(broker.bootstrap, partitions)
        figures["floor_confluent_kafka"] = {
            "records": floor_rows,
            "seconds": round(floor_s, 2),
            "records_per_s": round(floor_rows / floor_s),
        }
        log(f"(0) floor: {floor_rows:,} records in {floor_s:.2f}s = {floor_rows / floor_s:,.0f}/s")
        if args.only_insights or args.only_latency:
            args.skip_process = True
            args.insights = args.only_insights
            rows, elapsed = floor_rows, floor_s  # (a) skipped: the ratios below use the floor
        else:
            rows, elapsed = raw_read(spark, broker.bootstrap, partitions, workdir)
        figures["a_raw_read"] = {
            "records": rows,
            "seconds": round(elapsed, 1),
            "records_per_s": round(rows / elapsed),
        }
        log(f"(a) raw read: {rows:,} records in {elapsed:.1f}s = {rows / elapsed:,.0f}/s")

        if not args.skip_process:
            figures["p_process"] = process_to_ready(broker.bootstrap, args, workdir)
            log(f"(p) process start -> ready: {figures['p_process']}")

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
            b["ready_over_floor"] = round(b["seconds_to_ready"] / floor_s, 2)
            runs.append(b)
            log(
                f"(b) mirror, max_offsets_per_trigger={per_trigger:,}: {b['records']:,} records in "
                f"{b['seconds_to_ready']:.1f}s = {b['records_per_s']:,}/s (ratio {b['ratio_b_over_a']}; "
                f"{b['ready_over_floor']}x the floor)"
            )
        assert mirror is not None
        figures["b_mirror"] = runs
        figures["groups_mirrored"] = len(mirror.store)

        figures["latency"] = measure_latency(mirror, broker.bootstrap, args)
        if args.only_latency:
            figures["peak_rss_bytes"] = sampler.stop()
            mirror.stop()
            spark.stop()
            print(json.dumps(figures, indent=2))
            return 0
        if args.insights:
            mirror.stop()
            figures["insights"] = measure_insights(spark, broker.bootstrap, args, checkpoint)
            if args.only_insights:
                figures["peak_rss_bytes"] = sampler.stop()
                spark.stop()
                print(json.dumps(figures, indent=2))
                return 0
            mirror, _, phases = mirror_backfill(
                spark, broker.bootstrap, args, args.max_offsets_per_trigger[-1], checkpoint
            )

        # ---- 10k groups active in one micro-batch, on the running mirror (warm state store).
        # One commit per group inside ONE producer transaction: under read_committed none of them
        # is visible before the commit markers, then all are -- so one trigger sees them together
        # (commits issued one by one would straddle several triggers).
        burst = args.burst_groups or min(args.groups, 10_000)
        gc_pauses = GcPauses()
        t1 = time.monotonic()
        burst_in_one_transaction(broker.bootstrap, burst, args.topics)
        log(f"committed to {burst} groups in one transaction in {time.monotonic() - t1:.1f}s")
        # a batch completed before the commit returned cannot hold the burst's rows (the progress
        # history may still be catching up with it: a late batch of the latency phase is not one)
        completed_before = mirror.status.last_batch.batch_id
        # Read-committed makes the transaction visible partition by partition, as the coordinator
        # writes its commit markers: a micro-batch planned between two markers splits the burst.
        # The batches that hold its rows (one, usually) are taken together.
        deadline = time.monotonic() + 300
        big: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            time.sleep(0.5)
            busy = [
                p
                for p in mirror.progress_history  # the last 100 batches: never sliced by index
                if p["input_rows"] > 100 and p["batch_id"] > completed_before
            ]
            if sum(p["input_rows"] for p in busy) >= burst:
                big = busy
                break
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
        log(f"the micro-batch folding {burst} active groups: {figures['active_groups_batches']}")
        figures["driver_gc"] = gc_pauses.stop()
        log(f"the driver's Python GC meanwhile: {figures['driver_gc']}")
        figures["peak_rss_bytes"] = sampler.stop()
        figures["state_bytes"] = mirror.progress_history[-1].get("state_bytes")
        # reconciliation rounds meanwhile (ListGroups over every group; CM_RECONCILE_INTERVAL_S
        # shortens the 300 s default to see some in a bench)
        figures["reconcile_rounds"] = dict(mirror.status.view().reconcile_rounds)
        mirror.stop()

        # ---- applyInPandasWithState's own floor for as many groups, same session
        from pyspark import cloudpickle

        from bench import stateful_floor

        # the no-op fold travels by value: the Python workers cannot import bench/
        cloudpickle.register_pickle_by_value(stateful_floor)
        floor_run = stateful_floor.run

        floor_times = floor_run(spark, tempfile.mkdtemp(prefix="floor-", dir=workdir), burst, 2, 3)
        floor_best = min(floor_times[1:])
        # split over several batches: their sum (each pays the fixed cost once more)
        batch_s = sum(b["addBatch_ms"] for b in figures["active_groups_batches"]) / 1000
        figures["per_group"] = {
            "groups": burst,
            "batches": len(figures["active_groups_batches"]),
            "mirror_batch_addBatch_s": batch_s,
            "framework_floor_s": round(floor_best, 2),
            "ratio": round(batch_s / floor_best, 2),
        }
        log(f"per group: {figures['per_group']}")
        spark.stop()
    finally:
        broker.stop()
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
