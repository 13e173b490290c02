"""`coordinator-mirror capture`: copy every record of `__consumer_offsets` to a capture file."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from streaming.app.errors import EXIT_CONFIG, classify, client_options_error
from streaming.app.run_cmd import kv_pair
from streaming.cluster.jvm import TOPIC_DUMP, FrameReader, Jvm, KafkaCallError
from streaming.jars import MissingArtifactsError
from streaming.pipeline.capture_format import CapturedRecord, CaptureHeader, write_capture
from streaming.settings import SettingsError, load_settings

OFFSETS_TOPIC = "__consumer_offsets"


def iter_topic(
    bootstrap: str,
    *,
    topic: str = OFFSETS_TOPIC,
    isolation_level: str = "read_committed",
    options: dict[str, str] | None = None,
    timeout_s: float = 60.0,
    jvm: Jvm | None = None,
) -> Iterator[CapturedRecord]:
    """Yield every record of ``topic`` from the earliest offset up to the end offsets seen at start.

    Kafka's own consumer (`streaming.cluster.jvm`, with ``options`` verbatim) reads every
    partition at once, each partition's records in offset order; the end is the high watermark,
    or under ``read_committed`` the last stable offset, so an open transaction ends the capture
    where the coordinator's committed view ends.  No consumer group: nothing is committed, no
    group ACL is needed.  A JVM is started for the client unless ``jvm`` is given.
    """
    own = jvm is None
    jvm = jvm or Jvm.launch()
    conf = {**(options or {}), "bootstrap.servers": bootstrap, "isolation.level": isolation_level}
    try:
        dump = jvm.open(TOPIC_DUMP, conf, timeout_s)
    except BaseException:
        if own:
            jvm.close()
        raise
    try:
        partitions = [int(p) for p in dump.call("partitions", topic)]
        if not partitions:
            raise TopicMissingError(f"topic {topic} not available: the cluster does not have it")
        ranges = [int(x) for x in dump.call("assign", topic, _int_array(jvm, partitions))]
        ends = {ranges[i]: ranges[i + 2] for i in range(0, len(ranges), 3)}
        positions = {ranges[i]: ranges[i + 1] for i in range(0, len(ranges), 3)}
        deadline = time.monotonic() + timeout_s
        while any(positions[p] < ends[p] for p in ends):
            answer = FrameReader(dump.call("poll", 1000))
            moved = False
            for _ in range(answer.i32()):
                p, after = answer.i32(), answer.i64()
                moved |= after > positions[p]
                positions[p] = max(positions[p], after)
            for _ in range(answer.i32()):
                p, offset, ts = answer.i32(), answer.i64(), answer.i64()
                key, value = answer.bin(), answer.bin()
                yield CapturedRecord(partition=p, offset=offset, timestamp_ms=ts, key=key or b"", value=value)
            if moved:
                deadline = time.monotonic() + timeout_s
            elif time.monotonic() > deadline:
                behind = sorted(p for p in ends if positions[p] < ends[p])
                raise TimeoutError(f"{topic}{behind}: no progress for {timeout_s:.0f}s")
    finally:
        dump.close()
        if own:
            jvm.close()


def _int_array(jvm: Jvm, values: list[int]) -> Any:
    arr = jvm.gateway.new_array(jvm.gateway.jvm.int, len(values))
    for i, v in enumerate(values):
        arr[i] = v
    return arr


class TopicMissingError(RuntimeError):
    """The topic to capture does not exist (no group ever committed on a new cluster)."""


def capture(
    bootstrap: str,
    out: str,
    *,
    topic: str = OFFSETS_TOPIC,
    isolation_level: str = "read_committed",
    options: dict[str, str] | None = None,
    kafka_version: str | None = None,
    timeout_s: float = 60.0,
    jvm: Jvm | None = None,
    plugin_jars: list[str] | None = None,
    java_options: list[str] | None = None,
) -> int:
    """Capture ``topic`` into ``out``; starts a JVM for Kafka's client unless ``jvm`` is given."""
    header = CaptureHeader(
        source=f"kafka://{bootstrap}/{topic}",
        kafka_version=kafka_version,
        isolation_level=isolation_level,
        captured_at_ms=int(time.time() * 1000),
    )
    own = jvm is None
    jvm = jvm or Jvm.launch(plugin_jars=plugin_jars or (), java_options=java_options or ())
    try:
        records = iter_topic(
            bootstrap,
            topic=topic,
            isolation_level=isolation_level,
            options=options,
            timeout_s=timeout_s,
            jvm=jvm,
        )
        return write_capture(out, header, records)
    finally:
        if own:
            jvm.close()


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    handlers: dict[str, Callable[[argparse.Namespace], int]],
) -> None:
    p = sub.add_parser(
        "capture",
        help="write every record of __consumer_offsets to a file (JSON lines or Parquet)",
        description="Copy __consumer_offsets from the earliest offset to the current end into a "
        "capture file: partition, offset, timestamp, key and value bytes exactly (value null for "
        "tombstones).  The suffix picks the encoding: .jsonl, .jsonl.gz or .parquet.",
    )
    # the same flag names and (Java-style) client option names as `run`
    p.add_argument("--config", metavar="FILE", help="settings file: its kafka_options apply (as for run)")
    p.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    p.add_argument("--out", required=True, metavar="FILE")
    p.add_argument(
        "--topic", default=OFFSETS_TOPIC, help=f"the coordinator's topic (default: {OFFSETS_TOPIC})"
    )
    p.add_argument(
        "--isolation-level",
        choices=["read_committed", "read_uncommitted"],
        default="read_committed",
        help="read_committed (default) drops aborted transactional offset commits, as the "
        "coordinator does; read_uncommitted keeps them (for forensics).",
    )
    p.add_argument(
        "--kafka-options",
        action="append",
        default=[],
        type=kv_pair,
        metavar="KEY=VALUE",
        help="Kafka client option (repeatable), exactly as for `run`: Kafka's own Java client reads "
        "with them as given (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*, "
        "ssl.keystore.* of any type, config providers ...)",
    )
    p.add_argument(
        "--kafka-plugin-jars",
        action="append",
        default=[],
        metavar="JAR",
        help="a jar of Kafka client plugins the options name (login module, callback handler, config "
        "provider), as for `run` (repeatable)",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds without progress before failing")
    handlers["capture"] = _run


def _run(args: argparse.Namespace) -> int:
    try:
        # flags win over CM_KAFKA_OPTIONS__* and the settings file, as for `run`: secrets need not
        # be flags (which `ps` shows)
        base = load_settings(args.config, bootstrap_servers=args.bootstrap_servers)
        settings = load_settings(
            args.config,
            bootstrap_servers=args.bootstrap_servers,
            kafka_options={**base.kafka_options, **dict(args.kafka_options)},
            kafka_plugin_jars=args.kafka_plugin_jars or base.kafka_plugin_jars,
        )
        settings.check_client_files()
    except SettingsError as exc:
        print(f"coordinator-mirror capture: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    options = settings.kafka_options
    secrets = settings.secret_values()
    try:
        n = capture(
            args.bootstrap_servers,
            args.out,
            topic=args.topic,
            isolation_level=args.isolation_level,
            options=options,
            timeout_s=args.timeout,
            plugin_jars=settings.kafka_plugin_jars,
            java_options=settings.kafka_java_options(),
        )
    except (KafkaCallError, TopicMissingError, TimeoutError, MissingArtifactsError) as exc:
        found = (
            client_options_error("kafka_options", exc, options, secrets, bootstrap=args.bootstrap_servers)
            if isinstance(exc, KafkaCallError)
            else classify(exc, bootstrap=args.bootstrap_servers, secrets=secrets)
        )
        print(f"coordinator-mirror capture: {found.message}", file=sys.stderr)
        return found.exit_code
    print(f"captured {n} records of {args.topic} to {args.out}", file=sys.stderr)
    return 0
