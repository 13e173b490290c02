"""`coordinator-mirror decode`: print `__consumer_offsets` records as Kafka-formatter-shaped JSON.

Contract (used by others -- keep it stable):

* ``decode --key HEX [--value HEX]`` prints one JSON object, Kafka 4.x formatter shape
  ``{"key": {"type": K, "data": {...}}, "value": null | {"version": V, "data": {...}}}``
  (no ``--value`` = tombstone; ``--value ""`` = an empty, i.e. truncated, value).
  An unknown record type prints ``{"unknown": {...}}``, an undecodable record ``{"error": {...}}``.
* ``decode --capture FILE`` prints every record of a capture file (streaming.pipeline.capture_format) as
  JSON lines, each starting with its source ``partition``, ``offset`` and ``timestamp``, then
  summary counts on stderr.
* ``--topic __share_group_state`` reads the bytes as records of the share coordinator's topic
  (ShareSnapshot K=0, ShareUpdate K=1 -- same JSON shape, as Kafka's
  ``ShareGroupStateMessageFormatter`` prints them); a capture of that topic (``capture --topic
  __share_group_state``) is recognised by its header without the flag.

Exit codes: 0 ok; 2 usage error (bad hex, unreadable capture, bad flags); 3 the record's type is
unknown (single record only -- in a capture unknown types are counted, not failures); 4 the
record (or, with --capture, at least one record) could not be decoded.  Never a traceback for
bad input.  The JSON itself is built by `decoders.kafka_json` (pure).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, Final

from decoders.kafka_json import STATUS_ERROR, STATUS_OK, STATUS_UNKNOWN, record_json
from decoders.records import Source
from decoders.tables import REGISTRIES
from streaming.pipeline.capture_format import CaptureFormatError, read_capture, read_header

OFFSETS_TOPIC: Final = "__consumer_offsets"

EXIT_OK: Final = 0
EXIT_USAGE: Final = 2
EXIT_UNKNOWN: Final = 3
EXIT_UNDECODABLE: Final = 4


def _emit(obj: dict[str, Any]) -> None:
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
    out = getattr(sys.stdout, "buffer", None)
    if out is not None:
        out.write(line.encode("utf-8"))
    else:
        sys.stdout.write(line)


def _hex(flag: str, text: str) -> bytes:
    cleaned = "".join(text.split())
    if cleaned[:2].lower() == "0x":
        cleaned = cleaned[2:]
    try:
        return bytes.fromhex(cleaned)
    except ValueError as exc:
        raise _UsageError(f"{flag} is not valid hex ({exc})") from None


class _UsageError(Exception):
    pass


def _decode_one(args: argparse.Namespace) -> int:
    key = _hex("--key", args.key)
    value = None if args.value is None else _hex("--value", args.value)
    obj, status = record_json(key, value, registry=REGISTRIES[args.topic or OFFSETS_TOPIC])
    _emit(obj)
    return {STATUS_OK: EXIT_OK, STATUS_UNKNOWN: EXIT_UNKNOWN}.get(status, EXIT_UNDECODABLE)


def _capture_topic(path: str) -> str:
    """The topic a capture was taken from (its header's ``source``, ``kafka://host/topic``)."""
    try:
        source = read_header(path).source
    except (CaptureFormatError, OSError):
        return OFFSETS_TOPIC  # read_capture below reports what is wrong with the file
    topic = source.rsplit("/", 1)[-1] if source.startswith("kafka://") else ""
    return topic if topic in REGISTRIES else OFFSETS_TOPIC


def _decode_capture(path: str, topic: str | None) -> int:
    counts = {STATUS_OK: 0, STATUS_UNKNOWN: 0, STATUS_ERROR: 0}
    registry = REGISTRIES[topic or _capture_topic(path)]
    try:
        for rec in read_capture(path):
            src = Source(rec.partition, rec.offset, rec.timestamp_ms)
            obj, status = record_json(rec.key, rec.value, src, registry)
            counts[status] += 1
            _emit(obj)
    except (CaptureFormatError, OSError) as exc:
        raise _UsageError(f"cannot read capture {path}: {exc}") from None
    total = sum(counts.values())
    print(
        f"decoded {total} records: {counts[STATUS_OK]} ok, {counts[STATUS_UNKNOWN]} unknown type, "
        f"{counts[STATUS_ERROR]} undecodable",
        file=sys.stderr,
    )
    return EXIT_UNDECODABLE if counts[STATUS_ERROR] else EXIT_OK


def _run(args: argparse.Namespace) -> int:
    try:
        if args.capture is not None:
            if args.value is not None:
                raise _UsageError("--value goes with --key, not with --capture")
            return _decode_capture(args.capture, args.topic)
        return _decode_one(args)
    except _UsageError as exc:
        print(f"coordinator-mirror decode: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `... | head`
        return EXIT_OK


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    handlers: dict[str, Callable[[argparse.Namespace], int]],
) -> None:
    p = sub.add_parser(
        "decode",
        help="print __consumer_offsets records as JSON shaped like Kafka's own formatter",
        description="Decode one record given as hex (--key, optional --value; no --value means a "
        "tombstone) or every record of a capture file (--capture), printing JSON shaped like "
        "Kafka 4.x's formatter output.  Exit codes: 0 ok, 2 usage, 3 unknown record type, "
        "4 undecodable record(s).",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--key", metavar="HEX", help="record key bytes as hex")
    src.add_argument("--capture", metavar="FILE", help="capture file (.jsonl, .jsonl.gz, .parquet)")
    p.add_argument("--value", metavar="HEX", help="record value bytes as hex (omit for a tombstone)")
    p.add_argument(
        "--topic",
        choices=sorted(REGISTRIES),
        default=None,
        help="the topic the bytes come from (default: __consumer_offsets; for --capture, the "
        "capture's own topic)",
    )
    handlers["decode"] = _run
