"""The batch output's ``payload`` column: a typed record in one compact MessagePack form, and back.

This is the record's one encoding between the decoder and the fold: the Spark job carries the
cell untouched inside the group's packed row across the shuffle (`streaming.pipeline.prepare`),
and `state.fold` turns it back into the typed record -- no JSON or dict form in between.  Only
~1% of records (everything but offset commits) carry one.

Format, version 2 -- a MessagePack array::

    [2, record_type K, key, value_version V | nil, value | nil, layout | nil, ambiguous_layout]

``key``, ``value`` and every record class nested in them are arrays of the class's fields in
declaration order (`dataclasses.fields`); tuples are arrays, bytes are bin, None is nil,
`ErrorKind` a string.  The source is not repeated: the row's ``source_*`` columns carry it, and
`payload_to_record` takes it.  Only plain MessagePack types (no extension types, nothing like
pickle), so a cell is safe to read and means the same on every Python version; a reader of
another version fails loudly.  Positional arrays are ~3x smaller and several times faster both
ways than the version-1 JSON objects they replace (bench/payload.py).
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import types
import typing
from collections.abc import Callable
from typing import Any, Final

import msgpack

from decoders import records as rec_mod
from decoders.records import DecodeError, Record, Source
from decoders.tables import RECORD_TYPES

PAYLOAD_VERSION: Final = 2

Decoder = Callable[[Any], Any]

_FIELDS: dict[type, Callable[[Any], Any]] = {}
_DECODERS: dict[type, Decoder] = {}


def _fields_of(obj: Any) -> Any:
    """``msgpack``'s ``default`` hook: a record object as the tuple of its field values."""
    get = _FIELDS.get(type(obj))
    if get is None:
        cls = type(obj)
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"payload cannot encode {cls.__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        getter = operator.attrgetter(*names)
        get = getter if len(names) > 1 else (lambda o, g=getter: (g(o),))
        _FIELDS[cls] = get
    return get(obj)


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(rec_mod))


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _is_plain(tp: Any) -> bool:
    """Values of ``tp`` come out of ``msgpack.unpackb(use_list=False)`` exactly as the record
    holds them (arrays are already tuples)."""
    tp, _ = _strip_optional(tp)
    if tp in (int, str, bool, bytes, Any):
        return True
    if typing.get_origin(tp) is tuple:
        return all(a is Ellipsis or _is_plain(a) for a in typing.get_args(tp))
    return False


def _expr(tp: Any, v: str, env: dict[str, Any]) -> str:
    """Python expression rebuilding the value of type ``tp`` from its unpacked form ``v``."""
    if _is_plain(tp):
        return v
    inner_tp, optional = _strip_optional(tp)
    if isinstance(inner_tp, type) and issubclass(inner_tp, enum.Enum):
        name = f"_e{len(env)}"
        env[name] = inner_tp
        expr = f"{name}({v})"
    elif isinstance(inner_tp, type) and dataclasses.is_dataclass(inner_tp):
        name = f"_f{len(env)}"
        env[name] = _decoder(inner_tp)
        expr = f"{name}({v})"
    elif typing.get_origin(inner_tp) is tuple and typing.get_args(inner_tp)[1:] == (Ellipsis,):
        expr = f"tuple([{_expr(typing.get_args(inner_tp)[0], 'x', env)} for x in {v}])"
    else:
        raise TypeError(f"payload cannot convert {tp!r}")
    return f"(None if {v} is None else {expr})" if optional else expr


def _decoder(cls: type) -> Decoder:
    """Generated per class: the field tuple back into the frozen record (positional arguments)."""
    dec = _DECODERS.get(cls)
    if dec is not None:
        return dec
    hints = _hints(cls)
    env: dict[str, Any] = {"_cls": cls}
    fields = dataclasses.fields(cls)
    exprs = [_expr(hints[f.name], f"t[{i}]", env) for i, f in enumerate(fields)]
    if all(e == f"t[{i}]" for i, e in enumerate(exprs)):
        body = "_cls(*t)"
    else:
        body = "_cls(" + ", ".join(exprs) + ")"
    exec(compile(f"def dec(t):\n    return {body}\n", f"<payload decoder {cls.__name__}>", "exec"), env)
    built: Decoder = env["dec"]
    _DECODERS[cls] = built
    return built


def _key_cls(k: int) -> type:
    cls = RECORD_TYPES[k].key.cls
    assert cls is not None, f"record type {k}: key struct without a typed class"
    return cls


def record_to_payload(record: Record[Any, Any]) -> bytes:
    """A typed record (key, value, layout; not its source) as one payload cell."""
    cells = (
        PAYLOAD_VERSION,
        record.record_type,
        record.key,
        record.value_version,
        record.value,
        record.layout,
        record.ambiguous_layout,
    )
    out: bytes = msgpack.packb(cells, default=_fields_of, use_bin_type=True)
    return out


def payload_to_record(payload: bytes, source: Source) -> Record[Any, Any]:
    """Rebuild the typed `Record` from a ``payload`` cell and the row's source.  Raises ValueError
    on a malformed payload (payloads are produced by us, so that is a bug, not data)."""
    try:
        cells = msgpack.unpackb(payload, use_list=False, raw=False)
        version, k, key, value_version, value, layout, ambiguous = cells
    except (ValueError, TypeError) as exc:  # msgpack's errors are ValueError subclasses
        raise ValueError(f"not a version-{PAYLOAD_VERSION} payload: {exc}") from None
    if version != PAYLOAD_VERSION:
        raise ValueError(f"not a version-{PAYLOAD_VERSION} payload (version {version!r})")
    rt = RECORD_TYPES[k]
    return Record(
        source,
        k,
        _decoder(_key_cls(k))(key),
        value_version,
        None if value is None else _decoder(rt.value.cls)(value),
        layout,
        ambiguous,
    )


def _build_all() -> None:
    """Build every decoder at import, so that a record class the format cannot carry fails loudly.
    The embedded DecodeError (a member's ``subscription_error``) carries ``key=None``: plain."""
    for rt in RECORD_TYPES.values():
        _decoder(_key_cls(rt.k))
        if rt.value.cls is not None:
            _decoder(rt.value.cls)
    _decoder(DecodeError)


_build_all()
