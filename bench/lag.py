"""Cost of lag and consumer health for a large cluster.

    .venv/bin/python -m bench.lag [--groups 10000] [--partitions 50] [--broker-partitions 1000]

On the driver, with ``--groups`` real groups of ``--partitions`` committed offsets each (the
population of bench/series.py): what applying the changed groups costs when every group changed
(state bytes decoded, `LagTracker.apply_groups`, Burrow's window -- done by the offsets thread once
per round, the sink only parks the bytes), a round applied, one Burrow evaluation of every group,
the lag exposition (first render and a cached repeat) and its series count, and the driver memory
the lag state holds with Burrow's window full (10 commits per partition).  Times are CPU seconds
of this process (``time.process_time``: the machine is shared, wall clock is mostly waiting),
memory is the resident-set growth.  Then, unless ``--broker-partitions 0``, one offsets round on
a real local broker (lab) over that many topic-partitions (50-partition topics): its wall time and
requests.  The broker round is wall clock (it waits on the network).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

from lab.synthetic import settings, synthetic_groups
from state import codec
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.serving.burrow import Burrow
from streaming.serving.lag_metrics import LagExporter


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=50)
    p.add_argument("--intervals", type=int, default=10)
    p.add_argument("--broker-partitions", type=int, default=1000)
    p.add_argument(
        "--changed", type=float, default=0.1, help="share of groups committing in the incremental round"
    )
    args = p.parse_args()

    groups = list(synthetic_groups(args.groups, args.partitions))
    blobs = [(g.group_id, codec.encode(g)) for g in groups]
    del groups
    gc.collect()
    base = rss()
    tracker = LagTracker()
    burrow = Burrow(tracker, "bench", args.intervals, 0)
    exporter = LagExporter(tracker, burrow, settings())

    now = int(time.time() * 1000)

    def round_at(ms: int, grow: int) -> LogOffsets:
        return LogOffsets(ms, {tp: PartitionEnds(0, 5000 + grow, 5000 + grow) for tp in wanted})

    t0 = time.process_time()
    decoded = [(gid, codec.decode(b)) for gid, b in blobs]
    t_decode = time.process_time() - t0
    t0 = time.process_time()
    views = tracker.apply_groups(decoded)
    burrow.history.record(views, tracker)
    t_apply = time.process_time() - t0
    t0 = time.process_time()
    wanted = tracker.wanted()
    t_wanted = time.process_time() - t0
    for i in range(args.intervals):  # fill Burrow's window: every offset moves once per round
        tracker.apply_round(round_at(now + i * 10_000, 100 * i))
        for _, g in decoded:
            for tp, e in g.offsets.items():
                g.offsets[tp] = (e[0] + 50, e[1], e[2], e[3] + 10_000, *e[4:])
        burrow.history.record(tracker.apply_groups(decoded), tracker)
    del decoded
    gc.collect()
    memory = rss() - base
    t0 = time.process_time()
    tracker.apply_round(round_at(now + args.intervals * 10_000, 100 * args.intervals))
    t_round = time.process_time() - t0
    t0 = time.process_time()
    events = burrow.evaluate_all(now + args.intervals * 10_000, full=True)
    t_eval = time.process_time() - t0
    # the next rounds, incremental (what the mirror does) vs full (before: every group every round):
    # the log ends stop moving (the first flat sample still adds a point: evaluated), then a round
    # where they do not move and a tenth of the groups commit once more
    tracker.apply_round(round_at(now + args.intervals * 10_000 + 5_000, 100 * args.intervals))
    burrow.evaluate_all(now + args.intervals * 10_000 + 5_000)
    at = now + (args.intervals + 1) * 10_000
    decoded = [(gid, codec.decode(b)) for gid, b in blobs[:: max(1, round(1 / args.changed))]]
    for _, g in decoded:
        for tp, e in g.offsets.items():
            g.offsets[tp] = (e[0] + 50 * (args.intervals + 1), e[1], e[2], at - 1000, *e[4:])
    burrow.history.record(tracker.apply_groups(decoded), tracker)
    del decoded
    tracker.apply_round(round_at(at, 100 * args.intervals))
    t0 = time.process_time()
    burrow.evaluate_all(at)
    t_inc = time.process_time() - t0
    n_inc = burrow.last_evaluated
    t0 = time.process_time()
    burrow.evaluate_all(at, full=True)
    t_inc_full = time.process_time() - t0
    # a round where every end moved: every group is evaluated either way
    tracker.apply_round(round_at(at + 10_000, 100 * args.intervals + 50))
    t0 = time.process_time()
    burrow.evaluate_all(at + 10_000)
    t_moved = time.process_time() - t0
    n_moved = burrow.last_evaluated
    t0 = time.process_time()
    body = exporter.exposition()
    t_first = time.process_time() - t0
    t0 = time.process_time()
    exporter.exposition()
    t_again = time.process_time() - t0

    n = args.groups * args.partitions
    print(
        f"groups {args.groups} x {args.partitions} partitions = {n} committed offsets; "
        f"{len(wanted)} distinct topic-partitions"
    )
    print(
        f"changed groups into the tracker (offsets thread, once per round), every group changed: "
        f"decode {t_decode:.2f}s + apply/window {t_apply:.2f}s "
        f"({(t_decode + t_apply) / args.groups * 1e3:.3f} ms CPU/group)"
    )
    print(f"wanted partitions {t_wanted:.2f}s; round applied {t_round * 1e3:.1f} ms")
    print(
        f"Burrow evaluation of every group (full) {t_eval:.2f}s "
        f"({t_eval / args.groups * 1e3:.3f} ms/group, {len(events)} events)"
    )
    print(
        f"Burrow, next round, ends unchanged, {args.changed:.0%} of groups committed: incremental "
        f"{t_inc:.2f}s ({n_inc} groups evaluated) vs full {t_inc_full:.2f}s"
    )
    print(f"Burrow, a round where every end moved: incremental {t_moved:.2f}s ({n_moved} groups evaluated)")
    print(
        f"lag exposition: {exporter.last_series} series, {len(body) / 1e6:.1f} MB, "
        f"first {t_first:.2f}s, repeat (cached) {t_again * 1e3:.2f} ms"
    )
    print(
        f"driver memory of the lag state (tracker + window of {args.intervals}, RSS growth): "
        f"{memory / 1e6:.0f} MB "
        f"({burrow.history.memory_entries()} commits kept)"
    )

    if args.broker_partitions:
        broker_round(args.broker_partitions)
    return 0


def rss() -> int:
    """Resident set size of this process, bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def broker_round(n_partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from lab.broker import BrokerSettings, LocalKafka
    from streaming.cluster.groups import ClusterClient
    from streaming.cluster.jvm import Jvm
    from streaming.cluster.offsets import OffsetReader

    workdir = Path(tempfile.mkdtemp(prefix="cm-bench-lag-"))
    broker = LocalKafka(BrokerSettings(), workdir / "kafka").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = [f"bench-lag-{i}" for i in range(max(1, n_partitions // 50))]
        for f in admin.create_topics([NewTopic(t, 50, 1) for t in topics]).values():
            f.result(120)
        time.sleep(2)
        wanted = [(t, p) for t in topics for p in range(50)]
        jvm = Jvm.launch()
        reader = OffsetReader(ClusterClient(jvm, broker.bootstrap, {}))
        deadline = time.monotonic() + 120  # metadata and topic ids described; every leader ready
        while len(reader.read(wanted).partitions) < len(wanted) and time.monotonic() < deadline:
            time.sleep(1)
        times = []
        for _ in range(5):
            r = reader.read(wanted)
            times.append(r.round_seconds)
        print(
            f"offsets round on a real broker (1 broker, {len(wanted)} partitions): "
            f"median {sorted(times)[2] * 1e3:.0f} ms, max {max(times) * 1e3:.0f} ms, "
            f"{r.requests} requests (metadata + 3 ListOffsets; DescribeTopics on refresh), "
            f"{len(r.partitions)} partitions read"
        )
        jvm.close()
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
