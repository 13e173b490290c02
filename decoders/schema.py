"""The vocabulary of our schema tables: versions, field types, fields, structs, value families.

Everything here is inert data.  `decoders.tables` uses it to declare every key and value layout of
`__consumer_offsets`; `decoders.interpreter` (scalar) and `decoders.columnar` (vectorized) are the
only code that reads bytes according to these declarations, and the test-only encoder writes bytes
from the same declarations.  Field names are spelled exactly as in Kafka's message specs, because
the JSON output (`decoders.kafka_json`) must match Kafka's formatters field by field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

# --------------------------------------------------------------------------------------------
# Versions


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``hi=None`` means open-ended ("3+" in Kafka's spec notation)."""

    lo: int
    hi: int | None = None

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return version >= self.lo and (self.hi is None or version <= self.hi)

    def __str__(self) -> str:
        if self.hi is None:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


ALL: Final = Versions(0)
NONE: Final = Versions(1, 0)  # empty range


def since(version: int) -> Versions:
    return Versions(version)


def only(version: int) -> Versions:
    return Versions(version, version)


def between(lo: int, hi: int) -> Versions:
    return Versions(lo, hi)


# --------------------------------------------------------------------------------------------
# Field types


@dataclass(frozen=True, slots=True)
class Primitive:
    """A scalar wire type.  ``width`` is the fixed size in bytes, or None for variable-length types."""

    name: str
    width: int | None
    signed: bool = True

    def __str__(self) -> str:
        return self.name


INT8: Final = Primitive("int8", 1)
INT16: Final = Primitive("int16", 2)
INT32: Final = Primitive("int32", 4)
INT64: Final = Primitive("int64", 8)
UINT16: Final = Primitive("uint16", 2, signed=False)
UUID: Final = Primitive("uuid", 16)
STRING: Final = Primitive("string", None)
BYTES: Final = Primitive("bytes", None)


@dataclass(frozen=True, slots=True)
class ArrayOf:
    element: FieldType

    def __str__(self) -> str:
        return f"[]{self.element}"


@dataclass(frozen=True, eq=False)
class Struct:
    """An ordered list of fields.  ``cls`` is the typed, frozen class the interpreter builds.

    Identity (not structural) equality: two structs with the same fields are still different
    schema nodes (e.g. K=0's and K=1's keys), and compiled read plans are cached per node.
    """

    name: str
    fields: tuple[Field, ...]
    cls: type | None = None

    def __str__(self) -> str:
        return self.name

    def regular_fields(self, version: int, flexible: bool) -> tuple[Field, ...]:
        """Fields read in sequence for ``version`` (tagged fields live in the trailer instead)."""
        return tuple(
            f for f in self.fields if version in f.versions and not (flexible and f.is_tagged_in(version))
        )

    def tagged_fields(self, version: int, flexible: bool) -> tuple[Field, ...]:
        if not flexible:
            return ()
        return tuple(f for f in self.fields if version in f.versions and f.is_tagged_in(version))

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")


FieldType = Primitive | ArrayOf | Struct


class _Missing:
    """Marker for "no default declared": the type's natural default applies (0, "", empty, null)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()

_SNAKE_1 = re.compile(r"(.)([A-Z][a-z]+)")
_SNAKE_2 = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    """``leaderEpoch`` -> ``leader_epoch``; ``GroupId`` -> ``group_id``."""
    return _SNAKE_2.sub(r"\1_\2", _SNAKE_1.sub(r"\1_\2", name)).lower()


def json_name(name: str) -> str:
    """The name Kafka's generated JSON converters print: the spec name with a lower-case first letter.

    (``FieldSpec.camelCaseName()`` is ``lowerCaseFirst(name)``: ``GroupId`` prints as ``groupId``.)
    """
    return name[:1].lower() + name[1:]


@dataclass(frozen=True)
class Field:
    """One field of a struct.

    name      -- Kafka's spelling, used for raw decodes and the Kafka-shaped JSON.
    type      -- a Primitive, ArrayOf(...) or Struct.
    versions  -- versions in which the field exists.
    nullable  -- versions in which null is allowed (strings, bytes, arrays, structs).
    tag       -- tag number when the field is a tagged field (flexible versions only).
    default   -- wire default: tagged fields equal to it are omitted on the wire (and in Kafka's JSON).
    attr      -- attribute name on the typed record (default: snake_case(name)).
    none_if   -- wire values that mean "absent" and become None on the typed record (e.g. -1).
    """

    name: str
    type: FieldType
    versions: Versions = ALL
    nullable: Versions = NONE
    tag: int | None = None
    default: Any = MISSING
    attr: str = ""
    none_if: tuple[Any, ...] = ()
    tagged_versions: Versions = field(default=ALL)

    def __post_init__(self) -> None:
        if not self.attr:
            object.__setattr__(self, "attr", snake_case(self.name))

    def is_tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged_versions

    def is_nullable_in(self, version: int) -> bool:
        return version in self.nullable

    @property
    def json_name(self) -> str:
        return json_name(self.name)

    def wire_default(self) -> Any:
        """The value a reader assumes when the field is absent (tagged fields not on the wire)."""
        if self.default is not MISSING:
            return self.default
        t = self.type
        if isinstance(t, Primitive):
            if t is STRING:
                return None if self.nullable is not NONE else ""
            if t is BYTES:
                return None if self.nullable is not NONE else b""
            if t is UUID:
                return ZERO_UUID
            return 0
        # Kafka's MessageDataGenerator defaults an array to an empty list and a struct to an empty
        # instance -- also when the field is nullable -- unless the spec declares "default": "null"
        # (verified against the generated 4.3.1 classes: ClassicMemberMetadata, AssignmentEpochs,
        # LastAssignmentConfigs).  So a tagged nullable struct/array is written when it is null
        # (a tag carrying the null marker) and omitted when empty; Kafka's JSON prints the null.
        if isinstance(t, ArrayOf):
            return []
        return {f.name: f.wire_default() for f in t.fields}


ZERO_UUID: Final = bytes(16)


def F(  # noqa: N802 -- capitalised on purpose: the tables read as rows of F(...) declarations
    name: str,
    type_: FieldType,
    versions: Versions = ALL,
    *,
    nullable: Versions | bool = False,
    tag: int | None = None,
    default: Any = MISSING,
    attr: str = "",
    none_if: tuple[Any, ...] = (),
) -> Field:
    """Shorthand used by the tables: ``nullable=True`` means nullable in every version of the field."""
    if nullable is True:
        nullable_v = versions
    elif nullable is False:
        nullable_v = NONE
    else:
        nullable_v = nullable
    return Field(
        name=name,
        type=type_,
        versions=versions,
        nullable=nullable_v,
        tag=tag,
        default=default,
        attr=attr,
        none_if=none_if,
        tagged_versions=versions if tag is not None else NONE,
    )


# --------------------------------------------------------------------------------------------
# Value families and record types


@dataclass(frozen=True)
class Layout:
    """One candidate byte layout of a value version.

    Most versions have exactly one.  Kafka changed a few share-group records incompatibly without
    bumping the version (K=9 3.9 vs 4.0, K=11 and K=15 4.0 vs 4.1) and the 3.7 early-access
    KIP-848 records differ from 4.x under the same version 0; those families list several layouts,
    newest (preferred) first.  ``label`` names the Kafka releases that write it.
    """

    label: str
    struct: Struct
    versions: Versions = ALL


@dataclass(frozen=True)
class ValueFamily:
    """The value schema family selected by the record type K; the value version V picks the fields."""

    name: str
    versions: Versions
    flexible: Versions
    layouts: tuple[Layout, ...]
    cls: type

    def layouts_for(self, version: int) -> tuple[Layout, ...]:
        return tuple(lay for lay in self.layouts if version in lay.versions)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    @property
    def max_version(self) -> int:
        assert self.versions.hi is not None, "value families declare a closed version range"
        return self.versions.hi


@dataclass(frozen=True)
class RecordType:
    """One record type K of `__consumer_offsets`: its key struct and its value family."""

    k: int
    name: str  # Kafka 4.1+ CoordinatorRecordType enum name (or the spec name for dead types)
    key: Struct
    value: ValueFamily
    first_written_by: str
