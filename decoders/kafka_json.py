"""Kafka-formatter-shaped JSON of a record, built from the raw (wire-valued) decode.  Pure.

Shape (Kafka 4.1+ ``CoordinatorRecordMessageFormatter``)::

    {"key": {"type": K, "data": {...}}, "value": null | {"version": V, "data": {...}}}

``data`` follows Kafka's generated JSON converters (``JsonConverterGenerator``) so that phase 2
can compare it field by field with Kafka's own output:

* names are ``FieldSpec.camelCaseName()`` = the spec name with its first letter lower-cased
  (``group``, ``leaderEpoch``; ``GroupId`` prints as ``groupId``, ``Epoch`` as ``epoch``);
* only fields present in that version are printed; values are the *wire* values (leaderEpoch
  -1 prints as -1, metadata "" as "", a null string as null) -- not our None-mapped ones;
* bytes print as standard base64 with padding (Jackson's ``BinaryNode``); UUIDs as Kafka's
  22-char URL-safe base64 without padding, the zero UUID included when it is a regular field;
* tagged fields print only when they differ from their default; unknown tagged fields are not
  printed (Kafka drops them too).

Everything that is ours, not Kafka's, goes under one extra key ``value.extra`` (present only
when non-empty) so ``key``, ``value.version`` and ``value.data`` stay comparable verbatim:
``extra.consumerProtocol`` (decoded subscription/assignment of "consumer" groups, or the error
that blob produced), ``extra.layout`` / ``extra.ambiguousLayout`` (share-group and early-access
layout choice), ``extra.unknownTaggedFields``.

Non-records print ``{"unknown": {...}}`` or ``{"error": {...}}``.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from decoders.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    EmbeddedFailure,
    RawEmbedded,
    read_assignment,
    read_subscription,
)
from decoders.decode import RawRecord, Registry, decode_raw
from decoders.interpreter import UNKNOWN_TAGS, RawStruct
from decoders.records import NO_SOURCE, DecodeError, ErrorKind, Source, UnknownRecord
from decoders.schema import BYTES, UUID, ArrayOf, Field, FieldType, Primitive, Struct
from decoders.tables import CONSUMER_ASSIGNMENT, CONSUMER_SUBSCRIPTION, RECORD_TYPES
from decoders.uuids import kafka_uuid

STATUS_OK: Final = "ok"
STATUS_UNKNOWN: Final = "unknown"
STATUS_ERROR: Final = "error"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _value_json(
    t: FieldType, v: Any, *, version: int, flexible: bool, path: str, unknown: list[dict[str, Any]]
) -> Any:
    if v is None:
        return None
    if isinstance(t, Primitive):
        if t is UUID:
            return kafka_uuid(v)
        if t is BYTES:
            return b64(v)
        return v
    if isinstance(t, ArrayOf):
        return [
            _value_json(
                t.element, x, version=version, flexible=flexible, path=f"{path}[{i}]", unknown=unknown
            )
            for i, x in enumerate(v)
        ]
    return struct_json(t, v, version, flexible=flexible, path=path, unknown=unknown)


def _is_default(f: Field, v: Any) -> bool:
    return bool(v == f.wire_default())


def struct_json(
    struct: Struct,
    raw: RawStruct,
    version: int,
    *,
    flexible: bool,
    path: str = "",
    unknown: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One struct as Kafka's generated converter prints it (see module docstring)."""
    sink: list[dict[str, Any]] = [] if unknown is None else unknown
    out: dict[str, Any] = {}
    for f in struct.fields:
        if version not in f.versions:
            continue
        v = raw.get(f.name)
        if flexible and f.is_tagged_in(version) and _is_default(f, v):
            continue
        child = f"{path}.{f.json_name}" if path else f.json_name
        out[f.json_name] = _value_json(
            f.type, v, version=version, flexible=flexible, path=child, unknown=sink
        )
    for tag, data in raw.get(UNKNOWN_TAGS, ()):
        sink.append({"path": path, "tag": tag, "data": b64(data)})
    return out


def _embedded_json(raw: RawEmbedded | EmbeddedFailure, schema: Struct) -> dict[str, Any]:
    if isinstance(raw, EmbeddedFailure):
        return {
            "error": {
                "field": raw.field,
                "position": raw.position,
                "kind": str(raw.kind),
                "reason": raw.reason,
            }
        }
    out: dict[str, Any] = {"version": raw.version}
    if raw.read_as != raw.version:
        out["readAsVersion"] = raw.read_as
    out.update(struct_json(schema, raw.fields, raw.read_as or 0, flexible=False))
    return out


def _consumer_protocol_json(value: RawStruct) -> dict[str, Any]:
    members = []
    for m in value.get("members") or ():
        members.append(
            {
                "memberId": m["memberId"],
                "subscription": _embedded_json(read_subscription(m["subscription"]), CONSUMER_SUBSCRIPTION),
                "assignment": _embedded_json(read_assignment(m["assignment"]), CONSUMER_ASSIGNMENT),
            }
        )
    return {"members": members}


def raw_record_json(raw: RawRecord) -> dict[str, Any]:
    rt = raw.record_type
    out: dict[str, Any] = {"key": {"type": rt.k, "data": struct_json(rt.key, raw.key, 0, flexible=False)}}
    if raw.value is None or raw.value_version is None or raw.layout is None:
        out["value"] = None
        return out
    v = raw.value_version
    unknown: list[dict[str, Any]] = []
    data = struct_json(raw.layout.struct, raw.value, v, flexible=rt.value.is_flexible(v), unknown=unknown)
    value: dict[str, Any] = {"version": v, "data": data}
    extra: dict[str, Any] = {}
    if raw.multi_layout:
        extra["layout"] = raw.layout.label
        if raw.ambiguous_layout:
            extra["ambiguousLayout"] = True
    if unknown:
        extra["unknownTaggedFields"] = unknown
    if (
        rt is RECORD_TYPES.get(2)
        and raw.value.get("protocolType") == CONSUMER_PROTOCOL_TYPE
        and raw.value.get("members")
    ):
        extra["consumerProtocol"] = _consumer_protocol_json(raw.value)
    if extra:
        value["extra"] = extra
    out["value"] = value
    return out


def error_json(err: DecodeError) -> dict[str, Any]:
    return {
        "error": {
            "type": err.record_type,
            "version": err.version,
            "part": err.part,
            "field": err.field,
            "position": err.position,
            "kind": str(err.kind),
            "reason": err.reason,
            "key": err.key_bytes.hex(),
            "value": None if err.value_bytes is None else err.value_bytes.hex(),
        }
    }


def unknown_json(rec: UnknownRecord) -> dict[str, Any]:
    return {
        "unknown": {
            "type": rec.record_type,
            "key": rec.key_bytes.hex(),
            "value": None if rec.value_bytes is None else rec.value_bytes.hex(),
        }
    }


def record_json(
    key: bytes, value: bytes | None, source: Source | None = None, registry: Registry = RECORD_TYPES
) -> tuple[dict[str, Any], str]:
    """Decode one record to Kafka-shaped JSON; returns (json object, status).

    status is "ok", "unknown" (record type not known) or "error" (undecodable).  With a
    ``source``, the object starts with its ``partition``, ``offset`` and ``timestamp``.
    ``registry``: the record types of the record's topic (default `__consumer_offsets`; the
    share coordinator's `__share_group_state` prints the same shape, as Kafka's
    ``ShareGroupStateMessageFormatter`` does).
    """
    raw = decode_raw(key, value, source or NO_SOURCE, registry)
    body: dict[str, Any]
    if isinstance(raw, RawRecord):
        try:
            body, status = raw_record_json(raw), STATUS_OK
        except Exception as exc:  # a bug in this module must not become a traceback
            err = DecodeError(
                raw.source, raw.record_type.k, raw.value_version, "value", "", 0, ErrorKind.INTERNAL,
                f"internal decoder error: {exc!r}", None, raw.key_bytes, raw.value_bytes,
            )  # fmt: skip
            body, status = error_json(err), STATUS_ERROR
    elif isinstance(raw, UnknownRecord):
        body, status = unknown_json(raw), STATUS_UNKNOWN
    else:
        body, status = error_json(raw), STATUS_ERROR
    if source is None:
        return body, status
    return {
        "partition": source.partition,
        "offset": source.offset,
        "timestamp": source.timestamp_ms,
        **body,
    }, status
