"""The batch output's ``payload`` column: a typed record as compact JSON, and back.  Pure.

Why JSON (see decoders/README.md "The payload column"): it is pickle-free, stable across
Python versions, readable with Spark SQL (``get_json_object(payload, '$.value.epoch')``) while
debugging, and turning it back into frozen records costs about as much as decoding the wire
bytes again -- only ~1% of records (everything but offset commits) carry a payload.

Format, version 1 (``"v": 1``)::

    {"v": 1, "source": [partition, offset, timestamp_ms], "record_type": K,
     "key": {...}, "value_version": V | null, "value": {...} | null,
     "layout": "4.1+" (only when set), "ambiguous_layout": true (only when true)}

Objects use the typed records' attribute names; ``None`` attributes and empty ``unknown_tags``
are omitted; bytes are standard base64; tuples are lists.  `payload_to_record` rebuilds the exact
typed `Record` (the classes are found from the record type through the registry).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import types
import typing
from collections.abc import Callable
from typing import Any, Final

from decoders import records as rec_mod
from decoders.records import DecodeError, Record, Source
from decoders.tables import RECORD_TYPES

PAYLOAD_VERSION: Final = 1

Encoder = Callable[[Any], Any]
Decoder = Callable[[Any], Any]

_ENCODERS: dict[Any, Encoder] = {}
_DECODERS: dict[Any, Decoder] = {}


def _b64e(v: bytes) -> str:
    return base64.b64encode(v).decode("ascii")


def _b64d(v: str) -> bytes:
    return base64.b64decode(v)


def _identity(v: Any) -> Any:
    return v


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(rec_mod))


def _strip_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _encoder(tp: Any) -> Encoder:
    tp = _strip_optional(tp)
    enc = _ENCODERS.get(tp)
    if enc is not None:
        return enc
    if tp is bytes:
        enc = _b64e
    elif tp in (int, str, bool, Any):
        enc = _identity
    elif typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            inner = _encoder(args[0])
            enc = lambda v: [inner(x) for x in v]  # noqa: E731
        else:
            parts = [_encoder(a) for a in args]
            enc = lambda v: [p(x) for p, x in zip(parts, v, strict=True)]  # noqa: E731
    elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
        enc = _dataclass_encoder(tp)
    else:
        raise TypeError(f"payload cannot encode {tp!r}")
    _ENCODERS[tp] = enc
    return enc


def _dataclass_encoder(cls: type) -> Encoder:
    hints = _hints(cls)
    plan = [(f.name, _encoder(hints[f.name])) for f in dataclasses.fields(cls)]

    def encode(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, enc in plan:
            v = getattr(obj, name)
            if v is None or (name == "unknown_tags" and not v):
                continue
            out[name] = enc(v)
        return out

    return encode


def _decoder(tp: Any) -> Decoder:
    tp = _strip_optional(tp)
    dec = _DECODERS.get(tp)
    if dec is not None:
        return dec
    if tp is bytes:
        dec = _b64d
    elif tp in (int, str, bool, Any):
        dec = _identity
    elif typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            inner = _decoder(args[0])
            dec = lambda v: tuple(inner(x) for x in v)  # noqa: E731
        else:
            parts = [_decoder(a) for a in args]
            dec = lambda v: tuple(p(x) for p, x in zip(parts, v, strict=True))  # noqa: E731
    elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
        dec = _dataclass_decoder(tp)
    else:
        raise TypeError(f"payload cannot decode {tp!r}")
    _DECODERS[tp] = dec
    return dec


def _dataclass_decoder(cls: type) -> Decoder:
    hints = _hints(cls)
    plan = [(f.name, _decoder(hints[f.name])) for f in dataclasses.fields(cls)]

    def decode(obj: dict[str, Any]) -> Any:
        kw: dict[str, Any] = {}
        for name, dec in plan:
            v = obj.get(name)
            if v is None:
                kw[name] = () if name == "unknown_tags" else None
            else:
                kw[name] = dec(v)
        return cls(**kw)

    return decode


def record_to_payload(record: Record[Any, Any]) -> str:
    """Serialize a typed record (key, value, source, layout) to the payload JSON string."""
    rt = RECORD_TYPES[record.record_type]
    obj: dict[str, Any] = {
        "v": PAYLOAD_VERSION,
        "source": [record.source.partition, record.source.offset, record.source.timestamp_ms],
        "record_type": record.record_type,
        "key": _encoder(rt.key.cls)(record.key),
        "value_version": record.value_version,
        "value": None if record.value is None else _encoder(rt.value.cls)(record.value),
    }
    if record.layout is not None:
        obj["layout"] = record.layout
    if record.ambiguous_layout:
        obj["ambiguous_layout"] = True
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def payload_to_record(payload: str | bytes) -> Record[Any, Any]:
    """Rebuild the typed `Record` from a ``payload`` cell.  Raises ValueError on a malformed
    payload (payloads are produced by us, so that is a bug, not data)."""
    obj = json.loads(payload)
    if not isinstance(obj, dict) or obj.get("v") != PAYLOAD_VERSION:
        raise ValueError(f"not a version-{PAYLOAD_VERSION} payload")
    rt = RECORD_TYPES[int(obj["record_type"])]
    value = obj.get("value")
    p, o, t = obj["source"]
    return Record(
        source=Source(int(p), int(o), int(t)),
        record_type=rt.k,
        key=_decoder(rt.key.cls)(obj["key"]),
        value_version=obj.get("value_version"),
        value=None if value is None else _decoder(rt.value.cls)(value),
        layout=obj.get("layout"),
        ambiguous_layout=bool(obj.get("ambiguous_layout", False)),
    )


# DecodeError.key is typed Any; embedded errors (the only DecodeErrors inside a record) carry
# key=None, which the generic codec handles.  Touch the class so a schema change fails loudly.
_ = _dataclass_encoder(DecodeError)
