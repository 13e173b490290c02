"""The driver's reads of the cluster: Kafka's Java Admin client (the mirror's, `streaming.cluster`)
beside librdkafka's (confluent-kafka: what the mirror used before), on one local broker, one run.

    .venv/bin/python -m bench.driver_reads [--groups 100000] [--topics 100] [--rounds 5]

* ListGroups over ``--groups`` real groups (offsets committed for each, pipelined);
* a lag round over ``--topics`` x 50 partitions: topic metadata, then log start, high watermark
  and last stable offset of every partition (librdkafka: three ``list_offsets`` calls, as the old
  reader made them; Java: `OffsetReader.read`, the three in flight together);
* start-up: a client that answers DescribeCluster (Java: including the client JVM's start, as
  `run` and `capture` pay it, and opening one in a running JVM), and the resident memory of that
  JVM after the 100k-group listing.

Medians of ``--rounds``, wall clock (the calls wait on the broker).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def timed(fn: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(rounds):
        t = time.monotonic()
        out = fn()
        times.append(time.monotonic() - t)
    return statistics.median(times), out


def preload(admin: Any, groups: int, topic: str) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    inflight: list[Any] = []
    started = time.monotonic()
    for g in range(groups):
        req = ConsumerGroupTopicPartitions(f"bench-reads-g{g}", [TopicPartition(topic, g % 50, 1)])
        inflight.extend(admin.alter_consumer_group_offsets([req], request_timeout=120).values())
        if len(inflight) >= 2000:
            for fut in inflight:
                fut.result(120)
            inflight.clear()
    for fut in inflight:
        fut.result(120)
    print(f"preloaded {groups:,} groups in {time.monotonic() - started:.1f} s", flush=True)


def jvm_rss(jvm: Any) -> int:
    pid = int(jvm.gateway.jvm.java.lang.ProcessHandle.current().pid())
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=100_000)
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()

    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

    from lab.broker import BrokerSettings, LocalKafka
    from streaming.cluster.groups import ClusterClient
    from streaming.cluster.jvm import Jvm
    from streaming.cluster.offsets import OffsetReader

    broker = LocalKafka(BrokerSettings(heap="2g"), Path(tempfile.mkdtemp(prefix="cm-bench-reads-"))).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        topics = [f"bench-reads-t{i}" for i in range(args.topics)]
        for f in admin.create_topics([NewTopic(t, 50, 1) for t in topics]).values():
            f.result(300)
        time.sleep(2)
        preload(admin, args.groups, topics[0])
        wanted = [(t, p) for t in topics for p in range(50)]

        # -- start-up: a client that answered DescribeCluster
        def rdkafka_start() -> Any:
            a = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
            a.describe_cluster(request_timeout=30).result(31)
            return a

        def java_start() -> tuple[Any, Any]:
            jvm = Jvm.launch(quick_start=False)  # full JIT, as in the Spark driver's JVM
            c = ClusterClient(jvm, broker.bootstrap, {})
            c.cluster_id()
            return jvm, c

        t_rd_start, rd = timed(rdkafka_start, 1)
        t_java_start, (jvm, client) = timed(java_start, 1)
        t_open, other = timed(lambda: ClusterClient(jvm, broker.bootstrap, {}), 1)
        other.close()

        # -- ListGroups
        t_decode = 0.0

        def java_list() -> Any:
            nonlocal t_decode
            raw = client._reads.call("listGroups")  # the call and the bytes' trip to Python
            t = time.monotonic()
            listing = client.list_groups_from(raw)
            t_decode += time.monotonic() - t
            return listing

        t_rd_list, rd_groups = timed(
            lambda: rd.list_consumer_groups(request_timeout=120).result(121), args.rounds
        )
        t_java_list, java_groups = timed(java_list, args.rounds)
        t_decode /= args.rounds
        rss = jvm_rss(jvm)

        # -- a lag round
        def rdkafka_round() -> int:
            md = rd.list_topics(timeout=30)
            asked = [(t, p) for t, p in wanted if t in md.topics]
            n = 0
            for spec, iso in (
                (OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
                (OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED),
                (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED),
            ):
                futs = rd.list_offsets(
                    {TopicPartition(t, p): spec for t, p in asked}, isolation_level=iso, request_timeout=60
                )
                n = sum(1 for f in futs.values() if f.result(61) is not None)
            return n

        reader = OffsetReader(client)
        reader.read(wanted)  # topic ids described once, as the mirror's first round does
        t_rd_round, n_rd = timed(rdkafka_round, args.rounds)
        t_java_round, r = timed(lambda: reader.read(wanted), args.rounds)

        rows = [
            ("read", "librdkafka (before)", "Java Admin (now)"),
            (
                f"ListGroups of {args.groups:,} groups, median of {args.rounds}",
                f"{t_rd_list * 1e3:,.0f} ms ({len(rd_groups.valid):,} groups)",
                f"{t_java_list * 1e3:,.0f} ms ({len(java_groups.groups):,} groups; "
                f"{t_decode * 1e3:,.0f} ms of it decoding the answer in Python)",
            ),
            (
                f"lag round over {len(wanted):,} partitions, median of {args.rounds}",
                f"{t_rd_round * 1e3:,.0f} ms ({n_rd:,} partitions)",
                f"{t_java_round * 1e3:,.0f} ms ({len(r.partitions):,} partitions)",
            ),
            (
                "client up, DescribeCluster answered",
                f"{t_rd_start * 1e3:,.0f} ms",
                f"{t_java_start * 1e3:,.0f} ms with the JVM's start; {t_open * 1e3:,.0f} ms in a running JVM",
            ),
            ("memory", "(inside the mirror's process)", f"JVM RSS {rss / 2**20:,.0f} MiB after the listings"),
        ]
        print()
        for i, row in enumerate(rows):
            print("| " + " | ".join(row) + " |")
            if i == 0:
                print("|---|---|---|")
        client.close()
        jvm.close()
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
