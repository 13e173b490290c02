"""The embedded consumer protocol: GroupMetadataValue members' ``subscription`` / ``assignment`` bytes.

Spec §4.  Only groups whose protocolType is "consumer" carry these formats (Java KafkaConsumer,
Kafka Streams, librdkafka ...); other protocol types keep their bytes untouched.  Parsing follows
the Java client (``ConsumerProtocol``): an int16 version, negative is an error, versions above
3 are read as version 3 and trailing bytes are ignored (new versions may only append fields);
a zero-length *assignment* is a valid empty assignment (the coordinator stores one for members
the leader omitted from SyncGroup).  Failures come back as data, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from decoders.interpreter import RawStruct, struct_reader, typed_builder
from decoders.records import ConsumerAssignment, ConsumerSubscription, ErrorKind
from decoders.tables import CONSUMER_ASSIGNMENT, CONSUMER_PROTOCOL_MAX_VERSION, CONSUMER_SUBSCRIPTION
from decoders.wire import WireError, read_int16

CONSUMER_PROTOCOL_TYPE: Final = "consumer"


@dataclass(frozen=True, slots=True)
class EmbeddedFailure:
    """Where an embedded blob stopped making sense: field path inside the blob, byte position."""

    field: str
    position: int
    kind: ErrorKind
    reason: str


@dataclass(frozen=True, slots=True)
class RawEmbedded:
    """Wire-level decode of a blob: the version as written and the fields (Kafka names)."""

    version: int | None  # None only for a zero-length assignment
    read_as: int | None
    fields: RawStruct


def _read(blob: bytes, schema: Any, allow_empty: bool) -> RawEmbedded | EmbeddedFailure:
    if not blob:
        if allow_empty:
            return RawEmbedded(None, None, {"assignedPartitions": [], "userData": None})
        return EmbeddedFailure("version", 0, ErrorKind.TRUNCATED, "truncated: empty blob has no version")
    try:
        version, pos = read_int16(blob, 0, len(blob))
    except WireError as e:
        return EmbeddedFailure("version", e.position, e.kind, e.reason)
    if version < 0:
        return EmbeddedFailure("version", 0, ErrorKind.MALFORMED, f"malformed: negative version {version}")
    read_as = min(version, CONSUMER_PROTOCOL_MAX_VERSION)
    try:
        fields, _ = struct_reader(schema, read_as, False)(blob, pos, len(blob))
    except WireError as e:
        return EmbeddedFailure(e.field_path(), e.position, e.kind, e.reason)
    # Trailing bytes are ignored, as the Java client does (ConsumerProtocol.deserialize*).
    return RawEmbedded(version, read_as, fields)


def read_subscription(blob: bytes) -> RawEmbedded | EmbeddedFailure:
    return _read(blob, CONSUMER_SUBSCRIPTION, allow_empty=False)


def read_assignment(blob: bytes) -> RawEmbedded | EmbeddedFailure:
    return _read(blob, CONSUMER_ASSIGNMENT, allow_empty=True)


def decode_subscription(blob: bytes) -> ConsumerSubscription | EmbeddedFailure:
    raw = read_subscription(blob)
    if isinstance(raw, EmbeddedFailure):
        return raw
    sub: ConsumerSubscription = typed_builder(CONSUMER_SUBSCRIPTION, raw.read_as or 0)(
        raw.fields, version=raw.version
    )
    return sub


def decode_assignment(blob: bytes) -> ConsumerAssignment | EmbeddedFailure:
    raw = read_assignment(blob)
    if isinstance(raw, EmbeddedFailure):
        return raw
    asg: ConsumerAssignment = typed_builder(CONSUMER_ASSIGNMENT, raw.read_as or 0)(
        raw.fields, version=raw.version
    )
    return asg
