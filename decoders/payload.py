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

_ENCODERS: dict[type, Encoder] = {}
_DECODERS: dict[type, Decoder] = {}


def _b64e(v: bytes) -> str:
    return base64.b64encode(v).decode("ascii")


def _b64d(v: str) -> bytes:
    return base64.b64decode(v)


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(rec_mod))


def _strip_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _expr(tp: Any, v: str, env: dict[str, Any], encode: bool) -> str:
    """Python expression converting ``v`` of type ``tp`` to JSON-able (encode) or back."""
    tp = _strip_optional(tp)
    if tp in (int, str, bool, Any):
        return v
    if tp is bytes:
        return f"_b64e({v})" if encode else f"_b64d({v})"
    if _is_dataclass_type(tp):
        name = f"_f{len(env)}"
        env[name] = _encoder(tp) if encode else _decoder(tp)
        return f"{name}({v})"
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            inner = _expr(args[0], "x", env, encode)
            if inner == "x":
                return f"list({v})" if encode else f"tuple({v})"
            return f"[{inner} for x in {v}]" if encode else f"tuple([{inner} for x in {v}])"
        parts = ", ".join(_expr(a, f"{v}[{i}]", env, encode) for i, a in enumerate(args))
        return f"[{parts}]" if encode else f"({parts},)"
    raise TypeError(f"payload cannot convert {tp!r}")


def _encoder(cls: type) -> Encoder:
    """Generated per class: ``{attr: json value}``, omitting None and empty ``unknown_tags``."""
    enc = _ENCODERS.get(cls)
    if enc is not None:
        return enc
    hints = _hints(cls)
    env: dict[str, Any] = {"_b64e": _b64e}
    lines = ["def enc(o):", "    d = {}"]
    for f in dataclasses.fields(cls):
        expr = _expr(hints[f.name], "v", env, encode=True)
        test = "v" if f.name == "unknown_tags" else "v is not None"
        lines += [f"    v = o.{f.name}", f"    if {test}:", f"        d[{f.name!r}] = {expr}"]
    lines.append("    return d")
    exec(compile("\n".join(lines), f"<payload encoder {cls.__name__}>", "exec"), env)
    built: Encoder = env["enc"]
    _ENCODERS[cls] = built
    return built


def _decoder(cls: type) -> Decoder:
    """Generated per class: the inverse of `_encoder` (absent keys are None / ``()``)."""
    dec = _DECODERS.get(cls)
    if dec is not None:
        return dec
    hints = _hints(cls)
    env: dict[str, Any] = {"_b64d": _b64d, "_cls": cls}
    args = []
    for i, f in enumerate(dataclasses.fields(cls)):
        tmp = f"v{i}"
        expr = _expr(hints[f.name], tmp, env, encode=False)
        empty = "()" if f.name == "unknown_tags" else "None"
        if expr == tmp:
            args.append(f"{f.name}=g({f.name!r}, {empty})")
        else:
            args.append(f"{f.name}=({empty} if ({tmp} := g({f.name!r})) is None else {expr})")
    source = "def dec(d):\n    g = d.get\n    return _cls(" + ", ".join(args) + ")\n"
    exec(compile(source, f"<payload decoder {cls.__name__}>", "exec"), env)
    built: Decoder = env["dec"]
    _DECODERS[cls] = built
    return built


def _key_cls(k: int) -> type:
    cls = RECORD_TYPES[k].key.cls
    assert cls is not None, f"record type {k}: key struct without a typed class"
    return cls


def record_to_payload(record: Record[Any, Any]) -> str:
    """Serialize a typed record (key, value, source, layout) to the payload JSON string."""
    rt = RECORD_TYPES[record.record_type]
    obj: dict[str, Any] = {
        "v": PAYLOAD_VERSION,
        "source": [record.source.partition, record.source.offset, record.source.timestamp_ms],
        "record_type": record.record_type,
        "key": _encoder(_key_cls(rt.k))(record.key),
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
        key=_decoder(_key_cls(rt.k))(obj["key"]),
        value_version=obj.get("value_version"),
        value=None if value is None else _decoder(rt.value.cls)(value),
        layout=obj.get("layout"),
        ambiguous_layout=bool(obj.get("ambiguous_layout", False)),
    )


# DecodeError.key is typed Any; embedded errors (the only DecodeErrors inside a record) carry
# key=None, which the codec handles.  Build it at import so a schema change fails loudly.
_ = _encoder(DecodeError), _decoder(DecodeError)
