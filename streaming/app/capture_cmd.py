"""`coordinator-mirror capture`: copy every record of `__consumer_offsets` to a capture file."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from streaming.app.errors import StartupError, classify_security, classify_text
from streaming.app.run_cmd import kv_pair
from streaming.cluster.client_config import ClientOptionError, librdkafka_config
from streaming.pipeline.capture_format import CapturedRecord, CaptureHeader, write_capture
from streaming.settings import SettingsError, is_secret, load_settings

OFFSETS_TOPIC = "__consumer_offsets"


class ClientErrors(logging.Handler):
    """librdkafka's error callback and log lines, kept (not printed): a refused handshake shows
    only there -- the call that fails says just "transport failure"."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.secrets = secrets
        self.logger = logging.getLogger("coordinator_mirror.librdkafka")
        self.logger.propagate = False
        self.logger.setLevel(logging.INFO)
        self.logger.handlers = [self]

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        del self.lines[:-50]

    def error_cb(self, err: Any) -> None:
        self.lines.append(str(err))
        del self.lines[:-50]

    def fatal(self) -> StartupError | None:
        """A security failure seen so far (retrying will not fix it), else None."""
        for line in reversed(self.lines):
            found = classify_text(line, self.secrets)
            if found is not None:
                return found
        return None


def _metadata(consumer: Any, topic: str, timeout_s: float, errors: ClientErrors | None) -> Any:
    """The topic's metadata; gives up early once the client reported a security failure."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.list_topics(topic, timeout=min(2.0, timeout_s))
        except KafkaException:
            consumer.poll(0.1)  # serves the error and log callbacks queued so far (not assigned yet)
            fatal = errors.fatal() if errors else None
            if fatal is not None:
                raise fatal from None
            if time.monotonic() > deadline:
                raise


def iter_topic(
    bootstrap: str,
    *,
    topic: str = OFFSETS_TOPIC,
    isolation_level: str = "read_committed",
    client_config: dict[str, str] | None = None,
    timeout_s: float = 60.0,
    errors: ClientErrors | None = None,
) -> Iterator[CapturedRecord]:
    """Yield every record of ``topic`` from the earliest offset up to the end offsets seen at start.

    The end is the high watermark, or under ``read_committed`` the last stable offset, so an open
    transaction ends the capture where the coordinator's committed view ends.  Records are yielded
    partition by partition, each in offset order.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": "coordinator-mirror-capture",  # required by librdkafka; never committed
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation_level,
        "check.crcs": True,
        # librdkafka hides internal topics from consumers unless told otherwise.
        "topic.metadata.refresh.interval.ms": 60000,
    }
    conf.update(client_config or {})
    if errors is not None:
        conf.update(error_cb=errors.error_cb, logger=errors.logger)
    consumer = Consumer(conf)
    try:
        md = _metadata(consumer, topic, timeout_s, errors)
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None:
            raise KafkaException(f"topic {topic} not available: {tmd.error if tmd else 'missing'}")
        partitions = sorted(tmd.partitions)
        for p in partitions:
            tp = TopicPartition(topic, p)
            # Under read_committed the readable end is the last stable offset; the partition reports
            # EOF there, which ends the loop below even when `high` is never reached.
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)])
            deadline = time.monotonic() + timeout_s
            while True:
                msg = consumer.poll(1.0)
                if msg is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{topic}[{p}]: no progress for {timeout_s}s")
                    continue
                deadline = time.monotonic() + timeout_s
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        break
                    raise KafkaException(err)
                _ts_type, ts = msg.timestamp()
                offset = int(msg.offset() or 0)
                yield CapturedRecord(
                    partition=p,
                    offset=offset,
                    timestamp_ms=int(ts),
                    key=msg.key() or b"",
                    value=msg.value(),
                )
                if offset + 1 >= high:
                    break
    finally:
        consumer.close()


def capture(
    bootstrap: str,
    out: str,
    *,
    topic: str = OFFSETS_TOPIC,
    isolation_level: str = "read_committed",
    client_config: dict[str, str] | None = None,
    kafka_version: str | None = None,
    timeout_s: float = 60.0,
    errors: ClientErrors | None = None,
) -> int:
    header = CaptureHeader(
        source=f"kafka://{bootstrap}/{topic}",
        kafka_version=kafka_version,
        isolation_level=isolation_level,
        captured_at_ms=int(time.time() * 1000),
    )
    records = iter_topic(
        bootstrap,
        topic=topic,
        isolation_level=isolation_level,
        client_config=client_config,
        timeout_s=timeout_s,
        errors=errors,
    )
    return write_capture(out, header, records)


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
        help="Kafka client option, Java names as for `run` (security.protocol, sasl.jaas.config, "
        "ssl.truststore.location with ssl.truststore.type=PEM, ...); librdkafka.<name> passes a "
        "librdkafka option as it is (repeatable)",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds without progress before failing")
    handlers["capture"] = _run


def _run(args: argparse.Namespace) -> int:
    try:
        # flags win over CM_KAFKA_OPTIONS__* and the settings file, as for `run`: secrets need not
        # be flags (which `ps` shows)
        base = load_settings(args.config, bootstrap_servers=args.bootstrap_servers).kafka_options
    except SettingsError as exc:
        print(f"coordinator-mirror capture: {exc}", file=sys.stderr)
        return 2
    options = {**base, **dict(args.kafka_options)}
    secrets = [v for k, v in options.items() if is_secret(k)]
    try:
        client_config = librdkafka_config(options)
    except ClientOptionError as exc:
        print(f"coordinator-mirror capture: {exc}", file=sys.stderr)
        return 2
    errors = ClientErrors(secrets)
    try:
        n = capture(
            args.bootstrap_servers,
            args.out,
            topic=args.topic,
            isolation_level=args.isolation_level,
            client_config=client_config,
            timeout_s=args.timeout,
            errors=errors,
        )
    except Exception as exc:
        found = classify_security(exc, reversed(errors.lines), secrets)
        if found is None:
            raise
        print(f"coordinator-mirror capture: {found.message}", file=sys.stderr)
        return found.exit_code
    print(f"captured {n} records of {args.topic} to {args.out}", file=sys.stderr)
    return 0
