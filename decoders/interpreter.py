"""The one scalar interpreter: reads any struct of our schema tables, and builds typed records.

`struct_reader(struct, version, flexible)` compiles (once, cached) a read plan for one struct at
one version and encoding: a list of per-field readers from `decoders.wire`, nested structs and
arrays included, plus the tagged-field trailer for flexible versions.  The plan produces a *raw*
decode: a dict keyed by Kafka field names holding wire values (sentinels intact) -- the form the
Kafka-shaped JSON needs.  `typed_builder(struct)` turns a raw dict into the struct's frozen class,
mapping sentinels to None as the tables declare.  There is no per-version decode code anywhere.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final, Protocol

from decoders.records import ErrorKind
from decoders.schema import (
    BYTES,
    STRING,
    UUID,
    ZERO_UUID,
    ArrayOf,
    Field,
    FieldType,
    Primitive,
    Struct,
)
from decoders.uuids import kafka_uuid
from decoders.wire import (
    FIXED_ARRAY_FORMATS,
    PRIMITIVE_READERS,
    TAGS_FIELD,
    Reader,
    WireError,
    array_count_reader,
    bytes_reader,
    fixed_array_reader,
    read_int8,
    read_uvarint,
    string_reader,
)

UNKNOWN_TAGS: Final = "_unknownTaggedFields"  # raw-dict key holding ((tag, bytes), ...) in wire order

RawStruct = dict[str, Any]

# --------------------------------------------------------------------------------------------
# Minimum encoded sizes (for the array-count guard)


def min_size(t: FieldType, version: int, flexible: bool, nullable: bool = False) -> int:
    if isinstance(t, Primitive):
        if t.width is not None:
            return t.width
        if flexible:
            return 1
        return 2 if t is STRING else 4
    if isinstance(t, ArrayOf):
        return 1 if flexible else 4
    if nullable:
        return 1  # int8 null marker
    total = sum(
        min_size(f.type, version, flexible, f.is_nullable_in(version))
        for f in t.regular_fields(version, flexible)
    )
    return total + (1 if flexible else 0)


# --------------------------------------------------------------------------------------------
# Read plans

_PLANS: dict[tuple[int, int, bool], Reader] = {}


def field_reader(f: Field, version: int, flexible: bool, tagged: bool = False) -> Reader:
    """The reader for one field's value at ``version`` (tagged fields use their in-tag encoding)."""
    return type_reader(f.type, version, flexible, f.is_nullable_in(version), tagged=tagged)


def type_reader(t: FieldType, version: int, flexible: bool, nullable: bool, tagged: bool = False) -> Reader:
    if isinstance(t, Primitive):
        if t is STRING:
            return string_reader(nullable, flexible)
        if t is BYTES:
            return bytes_reader(nullable, flexible)
        return PRIMITIVE_READERS[t.name]
    if isinstance(t, ArrayOf):
        return _array_reader(t, version, flexible, nullable)
    inner = struct_reader(t, version, flexible)
    if not nullable:
        return inner
    if tagged:
        # Tagged nullable struct: a uvarint presence marker (0 = null) precedes the struct
        # (spec §1.5; MessageDataGenerator writes 1 and reads "0 means null").
        def read_tagged_nullable_struct(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
            marker, p = read_uvarint(buf, pos, end)
            if marker == 0:
                return None, p
            return inner(buf, p, end)

        return read_tagged_nullable_struct

    # Non-tagged nullable struct (e.g. StreamsGroupMemberMetadataValue.UserEndpoint): an int8
    # marker; Kafka's generated reader treats any negative byte as null.
    def read_nullable_struct(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
        marker, p = read_int8(buf, pos, end)
        if marker < 0:
            return None, p
        return inner(buf, p, end)

    return read_nullable_struct


def _array_reader(t: ArrayOf, version: int, flexible: bool, nullable: bool) -> Reader:
    elem = t.element
    count = array_count_reader(nullable, flexible, min_size(elem, version, flexible))
    if isinstance(elem, Primitive) and elem.name in FIXED_ARRAY_FORMATS:
        fmt, width = FIXED_ARRAY_FORMATS[elem.name]
        read_n = fixed_array_reader(fmt, width)

        def read_fixed_array(buf: bytes, pos: int, end: int) -> tuple[list[int] | None, int]:
            n, p = count(buf, pos, end)
            if n < 0:
                return None, p
            return read_n(buf, p, n)

        return read_fixed_array

    read_elem = type_reader(elem, version, flexible, nullable=False)

    def read_array(buf: bytes, pos: int, end: int) -> tuple[list[Any] | None, int]:
        n, p = count(buf, pos, end)
        if n < 0:
            return None, p
        items: list[Any] = []
        append = items.append
        for i in range(n):
            try:
                v, p = read_elem(buf, p, end)
            except WireError as e:
                e.path.append(f"[{i}]")
                raise
            append(v)
        return items, p

    return read_array


def struct_reader(struct: Struct, version: int, flexible: bool) -> Reader:
    """Compiled reader of ``struct`` at ``version``: returns (raw dict, new position)."""
    key = (id(struct), version, flexible)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _compile_struct(struct, version, flexible)
        _PLANS[key] = plan
    return plan


def _compile_struct(struct: Struct, version: int, flexible: bool) -> Reader:
    regular = tuple(
        (f.name, field_reader(f, version, flexible)) for f in struct.regular_fields(version, flexible)
    )
    tagged_fields = struct.tagged_fields(version, flexible)
    tagged = {f.tag: (f.name, field_reader(f, version, flexible, tagged=True)) for f in tagged_fields}
    tag_defaults = tuple((f.name, f.wire_default()) for f in tagged_fields)

    if not flexible:

        def read_classic_struct(buf: bytes, pos: int, end: int) -> tuple[RawStruct, int]:
            out: RawStruct = {}
            for name, rd in regular:
                try:
                    out[name], pos = rd(buf, pos, end)
                except WireError as e:
                    e.path.append(name)
                    raise
            return out, pos

        return read_classic_struct

    def read_flexible_struct(buf: bytes, pos: int, end: int) -> tuple[RawStruct, int]:
        out: RawStruct = {}
        for name, rd in regular:
            try:
                out[name], pos = rd(buf, pos, end)
            except WireError as e:
                e.path.append(name)
                raise
        for name, default in tag_defaults:
            out[name] = default
        pos = _read_trailer(buf, pos, end, tagged, out)
        return out, pos

    return read_flexible_struct


def _read_trailer(
    buf: bytes, pos: int, end: int, tagged: dict[int | None, tuple[str, Reader]], out: RawStruct
) -> int:
    """The tagged-field trailer: uvarint count, then (uvarint tag, uvarint size, data) each.
    Unknown tags are skipped by size and kept (tag, bytes) for inspection -- forward compatible
    exactly where Kafka is.  Known tags must use exactly their declared size."""
    try:
        count, pos = read_uvarint(buf, pos, end)
    except WireError as e:
        e.path.append(TAGS_FIELD)
        raise
    if count == 0:
        return pos
    if count * 2 > end - pos:
        err = WireError(
            pos,
            ErrorKind.MALFORMED,
            f"malformed: {count} tagged fields cannot fit in the {end - pos} bytes left",
        )
        err.path.append(TAGS_FIELD)
        raise err
    unknown: list[tuple[int, bytes]] = []
    last = -1
    for _ in range(count):
        tag_pos = pos
        try:
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
        except WireError as e:
            e.path.append(TAGS_FIELD)
            raise
        entry = tagged.get(tag)
        name = entry[0] if entry is not None else TAGS_FIELD
        if tag <= last:
            err = WireError(
                tag_pos, ErrorKind.MALFORMED, f"malformed: tag {tag} after tag {last} (tags must ascend)"
            )
            err.path.append(name)
            raise err
        last = tag
        fend = pos + size
        if fend > end:
            err = WireError(
                tag_pos,
                ErrorKind.TRUNCATED,
                f"truncated: tagged field {tag} of {size} bytes, {end - pos} left",
            )
            err.path.append(name)
            raise err
        if entry is None:
            unknown.append((tag, buf[pos:fend]))
        else:
            try:
                value, p = entry[1](buf, pos, fend)
            except WireError as e:
                e.path.append(name)
                raise
            if p != fend:
                err = WireError(
                    tag_pos,
                    ErrorKind.MALFORMED,
                    f"malformed: tagged field {tag} declares {size} bytes, its value uses {p - pos}",
                )
                err.path.append(name)
                raise err
            out[name] = value
        pos = fend
    if unknown:
        out[UNKNOWN_TAGS] = tuple(unknown)
    return pos


# --------------------------------------------------------------------------------------------
# Raw -> typed


def uuid_or_none(raw: bytes | None) -> str | None:
    if raw is None or raw == ZERO_UUID:
        return None
    return kafka_uuid(raw)


class Builder(Protocol):
    def __call__(self, raw: RawStruct, /, **extra: Any) -> Any: ...


_BUILDERS: dict[tuple[int, int], Builder] = {}


def _conversion(f: Field, version: int, src: str, env: dict[str, Any], tmp: str) -> str:
    """Python expression turning the raw value ``src`` of field ``f`` into its typed value."""
    t = f.type
    if isinstance(t, Primitive):
        if t is UUID:
            return f"_uuid({src})"
        if not f.none_if:
            return src
        test = f"{tmp} == {f.none_if[0]!r}" if len(f.none_if) == 1 else f"{tmp} in {f.none_if!r}"
        return f"(None if ({tmp} := {src}) is None or {test} else {tmp})"
    # A tagged array/struct at its wire default (Kafka's empty list / empty struct, i.e. the tag
    # was not on the wire) is "not set" on the typed record, like a null: None.
    none_test = f"({tmp} := {src}) is None"
    if f.tag is not None:
        default = f"_d{len(env)}"
        env[default] = f.wire_default()
        none_test += f" or {tmp} == {default}"
    if isinstance(t, ArrayOf):
        elem = t.element
        if isinstance(elem, Struct):
            name = f"_b{len(env)}"
            env[name] = typed_builder(elem, version)
            return f"(None if {none_test} else tuple([{name}(x) for x in {tmp}]))"
        if elem is UUID:
            return f"(None if {none_test} else tuple(map(_uuid, {tmp})))"
        return f"(None if {none_test} else tuple({tmp}))"
    name = f"_b{len(env)}"
    env[name] = typed_builder(t, version)
    return f"(None if {none_test} else {name}({tmp}))"


def typed_builder(struct: Struct, version: int) -> Builder:
    """Builder raw dict -> ``struct.cls`` instance for raw dicts read at ``version``.

    Generated once per (struct, version) from the table, like Kafka generates its message
    classes: fields absent in ``version`` become None, sentinels declared in ``none_if`` become
    None, arrays become tuples, nested structs their classes, unknown tags are kept.  Keyword
    ``extra`` values override (or add) attributes, e.g. the decoded consumer protocol.
    """
    key = (id(struct), version)
    cached = _BUILDERS.get(key)
    if cached is not None:
        return cached
    cls = struct.cls
    if cls is None:
        raise TypeError(f"struct {struct.name} declares no typed class")
    env: dict[str, Any] = {"_cls": cls, "_uuid": uuid_or_none}
    exprs: list[tuple[str, str]] = []
    for i, f in enumerate(struct.fields):
        if version in f.versions:
            exprs.append((f.attr, _conversion(f, version, f"raw[{f.name!r}]", env, f"_v{i}")))
        else:
            exprs.append((f.attr, "None"))
    if any(fl.name == "unknown_tags" for fl in dataclasses.fields(cls)):
        exprs.append(("unknown_tags", f"raw.get({UNKNOWN_TAGS!r}, ())"))
    direct = ", ".join(f"{attr}={expr}" for attr, expr in exprs)
    merged = "\n".join(
        f"    kw[{attr!r}] = extra[{attr!r}] if {attr!r} in extra else {expr}" for attr, expr in exprs
    )
    source = (
        "def build(raw, /, **extra):\n"
        "    if not extra:\n"
        f"        return _cls({direct})\n"
        "    kw = {}\n"
        f"{merged}\n"
        "    for k, v in extra.items():\n"
        "        kw.setdefault(k, v)\n"
        "    return _cls(**kw)\n"
    )
    exec(compile(source, f"<typed builder {struct.name} v{version}>", "exec"), env)
    build: Builder = env["build"]
    _BUILDERS[key] = build
    return build
