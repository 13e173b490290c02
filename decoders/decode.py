"""Per-record decoding: key/value bytes -> `Record` | `UnknownRecord` | `DecodeError`, never raising.

Two steps, both driven by the tables in `decoders.tables`:

1. `decode_raw` -- framing (int16 K, int16 V), registry lookup, layout choice, and the scalar
   interpreter; yields wire values keyed by Kafka field names (`RawRecord`).  The Kafka-shaped
   JSON is built from this form because it must mirror the wire, sentinels included.
2. `to_record` -- raw -> typed, frozen records; sentinels become None; for consumer groups the
   embedded subscription/assignment are decoded (§4), a broken blob becoming a `DecodeError`
   attached to that member instead of failing the group record.

Strictness: a key or value must be consumed exactly.  Kafka's own readers ignore trailing bytes,
but real brokers never write any, and exact consumption is what lets us detect the incompatible
same-version layout changes of the share-group records (a 4.0 reader would silently ignore the
MetadataHash that 4.1 appends to K=11).

Layouts that share a version (K=9 3.9/4.0, K=11 and K=15 4.0/4.1 -- KIP-932 records changed
without a version bump -- and the 3.7 early-access KIP-848 K=4,5,7,8): every candidate layout of
the family is tried; those that decode *and consume the value exactly* fit; the newest fitting
layout wins (``Record.layout`` names it) and ``ambiguous_layout`` is set when more than one fits,
so the pipeline can count them; when none fits, the error of the candidate that got furthest is
returned.  Details and the reasoning: decoders/README.md, "Layouts that share a version".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from decoders.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    EmbeddedFailure,
    decode_assignment,
    decode_subscription,
)
from decoders.interpreter import RawStruct, struct_reader, typed_builder
from decoders.records import (
    NO_SOURCE,
    DecodeError,
    DecodeResult,
    ErrorKind,
    GroupMember,
    Record,
    Source,
    UnknownRecord,
)
from decoders.schema import Layout, RecordType
from decoders.tables import GROUP_MEMBER, RECORD_TYPES, SHARE_STATE_RECORD_TYPES
from decoders.wire import WireError

END_FIELD: Final = "<end>"  # field name for "bytes left over after the last field"
TYPE_FIELD: Final = "type"  # the key's int16 record-type prefix
VERSION_FIELD: Final = "version"  # the value's int16 version prefix
GROUP_METADATA_TYPE: Final = 2
#: a registry of record types: K -> (key struct, value family) of one topic (`decoders.tables`)
Registry = Mapping[int, RecordType]


@dataclass(frozen=True, slots=True)
class RawRecord:
    """A successfully framed and interpreted record, wire values intact."""

    source: Source
    record_type: RecordType
    key: RawStruct
    value_version: int | None
    value: RawStruct | None
    layout: Layout | None = None
    ambiguous_layout: bool = False
    key_bytes: bytes = b""
    value_bytes: bytes | None = None

    @property
    def multi_layout(self) -> bool:
        return len(self.record_type.value.layouts_for(self.value_version or 0)) > 1


def _int16(buf: bytes) -> int:
    return int.from_bytes(buf[:2], "big", signed=True)


def decode_raw(
    key: bytes, value: bytes | None, source: Source = NO_SOURCE, registry: Registry = RECORD_TYPES
) -> RawRecord | UnknownRecord | DecodeError:
    """Frame and interpret one record; wire values in Kafka's field names.  Never raises.
    ``registry``: the record types of the topic the bytes come from (`__consumer_offsets` by
    default; `decoders.tables.SHARE_STATE_RECORD_TYPES` for `__share_group_state`)."""
    try:
        return _decode_raw(bytes(key), None if value is None else bytes(value), source, registry)
    except Exception as exc:  # a decoder bug must not stop the stream: report it as data
        return DecodeError(
            source=source,
            record_type=None,
            version=None,
            part="key",
            field="",
            position=0,
            kind=ErrorKind.INTERNAL,
            reason=f"internal decoder error: {exc!r}",
            key_bytes=bytes(key),
            value_bytes=None if value is None else bytes(value),
        )


def _decode_raw(
    key: bytes, value: bytes | None, source: Source, registry: Registry
) -> RawRecord | UnknownRecord | DecodeError:
    if len(key) < 2:
        return DecodeError(
            source,
            None,
            None,
            "key",
            TYPE_FIELD,
            0,
            ErrorKind.TRUNCATED,
            f"truncated: int16 needs 2 bytes, {len(key)} left",
            None,
            key,
            value,
        )
    k = _int16(key)
    rt = registry.get(k)
    if rt is None:
        return UnknownRecord(source, k, key, value)

    # Keys: always classic, "version 0" of their struct (spec §1.2).
    try:
        key_raw, pos = struct_reader(rt.key, 0, False)(key, 2, len(key))
    except WireError as e:
        return DecodeError(
            source, k, None, "key", e.field_path(), e.position, e.kind, e.reason, None, key, value
        )
    if pos != len(key):
        return DecodeError(
            source,
            k,
            None,
            "key",
            END_FIELD,
            pos,
            ErrorKind.TRAILING_BYTES,
            f"malformed: {len(key) - pos} bytes after the last key field",
            None,
            key,
            value,
        )
    if value is None:
        return RawRecord(source, rt, key_raw, None, None, key_bytes=key, value_bytes=None)
    return _decode_value(_Ctx(source, rt, key_raw, key, value))


def _decode_value(ctx: _Ctx) -> RawRecord | DecodeError:
    """The value half: its version, then the newest layout of that version that fits exactly."""
    source, rt, key_raw, key, value = ctx.source, ctx.rt, ctx.key_raw, ctx.key, ctx.value
    k = rt.k
    family = rt.value
    if len(value) < 2:
        return _value_error(
            ctx,
            None,
            _Failure(
                VERSION_FIELD, 0, ErrorKind.TRUNCATED, f"truncated: int16 needs 2 bytes, {len(value)} left"
            ),
        )
    v = _int16(value)
    if v not in family.versions:
        known = family.versions
        reason = f"unknown value version {v} of {family.name} (record type {k}; known versions {known})"
        return _value_error(ctx, v, _Failure(VERSION_FIELD, 0, ErrorKind.UNKNOWN_VERSION, reason))
    flexible = family.is_flexible(v)
    layouts = family.layouts_for(v)

    fits: list[tuple[Layout, RawStruct]] = []
    failures: list[tuple[Layout, _Failure]] = []
    for layout in layouts:
        try:
            raw, end = struct_reader(layout.struct, v, flexible)(value, 2, len(value))
        except WireError as e:
            failures.append((layout, _Failure(e.field_path(), e.position, e.kind, e.reason)))
            continue
        if end != len(value):
            reason = f"malformed: {len(value) - end} bytes after the last value field"
            failures.append((layout, _Failure(END_FIELD, end, ErrorKind.TRAILING_BYTES, reason)))
            continue
        fits.append((layout, raw))

    if fits:
        layout, raw = fits[0]  # newest layout that consumes the bytes exactly
        return RawRecord(
            source,
            rt,
            key_raw,
            v,
            raw,
            layout=layout,
            ambiguous_layout=len(fits) > 1,
            key_bytes=key,
            value_bytes=value,
        )
    if len(layouts) == 1:
        return _value_error(ctx, v, failures[0][1])
    # No candidate fits: report the one that got furthest (ties: the newest).
    best_layout, best = max(failures, key=lambda f: f[1].position)
    labels = ", ".join(lay.label for lay in layouts)
    reason = f"no candidate layout ({labels}) fits; {best_layout.label}: {best.reason}"
    return _value_error(ctx, v, best._replace(kind=ErrorKind.NO_LAYOUT, reason=reason))


@dataclass(frozen=True, slots=True)
class _Ctx:
    """What every value error needs to know about the record it came from."""

    source: Source
    rt: RecordType
    key_raw: RawStruct
    key: bytes
    value: bytes


class _Failure(NamedTuple):
    """Where and why a value stopped decoding."""

    field: str
    position: int
    kind: ErrorKind
    reason: str


def _value_error(ctx: _Ctx, version: int | None, f: _Failure) -> DecodeError:
    typed_key = typed_builder(ctx.rt.key, 0)(ctx.key_raw)
    return DecodeError(
        ctx.source,
        ctx.rt.k,
        version,
        "value",
        f.field,
        f.position,
        f.kind,
        f.reason,
        typed_key,
        ctx.key,
        ctx.value,
    )


# --------------------------------------------------------------------------------------------
# Raw -> typed


_GROUP_METADATA: Final = RECORD_TYPES[GROUP_METADATA_TYPE]


def to_record(raw: RawRecord) -> Record[Any, Any]:
    rt = raw.record_type
    key = typed_builder(rt.key, 0)(raw.key)
    value: Any = None
    layout_label: str | None = None
    if raw.value is not None:
        assert raw.layout is not None and raw.value_version is not None
        build = typed_builder(raw.layout.struct, raw.value_version)
        if rt is _GROUP_METADATA and raw.value.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
            value = build(raw.value, members=_consumer_members(raw, raw.value_version))
        else:
            value = build(raw.value)
        if raw.multi_layout:
            layout_label = raw.layout.label
    return Record(
        source=raw.source,
        record_type=rt.k,
        key=key,
        value_version=raw.value_version,
        value=value,
        layout=layout_label,
        ambiguous_layout=raw.ambiguous_layout,
    )


def _consumer_members(raw: RawRecord, version: int) -> tuple[GroupMember, ...]:
    """Members of a "consumer" group with their embedded subscription/assignment decoded (§4);
    a broken blob becomes that member's ``*_error``, never the record's."""
    assert raw.value is not None
    build_member = typed_builder(GROUP_MEMBER, version)
    members = []
    for i, m in enumerate(raw.value["members"]):
        sub = decode_subscription(m["subscription"])
        asg = decode_assignment(m["assignment"])
        members.append(
            build_member(
                m,
                consumer_subscription=None if isinstance(sub, EmbeddedFailure) else sub,
                consumer_assignment=None if isinstance(asg, EmbeddedFailure) else asg,
                subscription_error=_embedded_error(raw, i, "subscription", m["subscription"], sub),
                assignment_error=_embedded_error(raw, i, "assignment", m["assignment"], asg),
            )
        )
    return tuple(members)


def _embedded_error(raw: RawRecord, index: int, part: str, blob: bytes, result: object) -> DecodeError | None:
    if not isinstance(result, EmbeddedFailure):
        return None
    path = f"members[{index}].{part}"
    if result.field:
        path += "." + result.field
    return DecodeError(
        source=raw.source,
        record_type=raw.record_type.k,
        version=raw.value_version,
        part=part,
        field=path,
        position=result.position,
        kind=result.kind,
        reason=result.reason,
        key=None,
        key_bytes=b"",
        value_bytes=blob,
    )


def decode_record(
    key: bytes, value: bytes | None, source: Source = NO_SOURCE, registry: Registry = RECORD_TYPES
) -> DecodeResult:
    """Decode one `__consumer_offsets` record (or, with ``registry``, one of another coordinator
    topic).  Never raises.

    Returns a `Record` (``value is None`` for a tombstone), an `UnknownRecord` for a record type
    we do not know, or a `DecodeError` for anything damaged or of an unknown value version.
    """
    raw = decode_raw(key, value, source, registry)
    if not isinstance(raw, RawRecord):
        return raw
    try:
        return to_record(raw)
    except Exception as exc:  # a builder bug must not stop the stream
        return DecodeError(
            source, raw.record_type.k, raw.value_version, "value", "", 0, ErrorKind.INTERNAL,
            f"internal decoder error: {exc!r}",
            None, raw.key_bytes, raw.value_bytes,
        )  # fmt: skip


def decode_share_state_record(key: bytes, value: bytes | None, source: Source = NO_SOURCE) -> DecodeResult:
    """Decode one `__share_group_state` record (K=0 ShareSnapshot, K=1 ShareUpdate).  Never raises."""
    return decode_record(key, value, source, SHARE_STATE_RECORD_TYPES)
