"""The one column contract of a record's path through the pipeline, declared once.

A decoded record is a row of these columns from the batch decoder (`decoders.batch`) to the fold
(`state.fold.fold_columns`): the Spark job adds the collapse counters (`streaming.pipeline.prepare`),
packs the ``shuffled`` columns of each group into one cell to cross the shuffle, and the stateful
step unpacks them into column lists; undecodable rows leave as error rows of the ``error``
columns.  Everything that lists columns -- the Arrow schema, the Spark DDL, the pack order, the
error row -- is computed from `COLUMNS`, so adding a column is one line here.

Pure: types are named (`TYPES`), the Arrow types are bound in `decoders.batch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

ColumnType = Literal["string", "binary", "bool", "int16", "int32", "int64"]
Stage = Literal["decode", "collapse"]

#: column type -> Spark SQL type (the DDL string ``mapInArrow`` takes)
SPARK_TYPES: Final[dict[str, str]] = {
    "string": "STRING",
    "binary": "BINARY",
    "bool": "BOOLEAN",
    "int16": "SMALLINT",
    "int32": "INT",
    "int64": "BIGINT",
}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: ColumnType
    doc: str
    nullable: bool = True
    #: "decode": written by the batch decoder; "collapse": added when offset commits are collapsed
    stage: Stage = "decode"
    #: crosses the shuffle inside the packed group (``group_id`` is the grouping key itself)
    shuffled: bool = True
    #: part of an error row (status != "ok"): what the error output and the metrics read
    error: bool = False


COLUMNS: Final[tuple[Column, ...]] = (
    Column("status", "string", '"ok" | "unknown" (record type) | "error"', nullable=False, error=True),
    Column("record_type", "int16", "K; null only when the key has < 2 bytes", error=True),
    Column("value_version", "int16", "V; null for tombstones and unknown types", error=True),
    Column("group_id", "string", "every known type (also on errors when the key decoded)", shuffled=False),
    Column("topic", "string", "K=0/1: the committed topic"),
    Column("partition_num", "int32", "K=0/1: the committed partition"),
    Column("member_id", "string", "K=5,7,8,10,13,14,19,21,22", shuffled=False),
    Column("is_tombstone", "bool", "value was null", nullable=False),
    Column("committed_offset", "int64", "K=0/1 values ..."),
    Column("leader_epoch", "int32", "null when -1 / absent (V<3)"),
    Column("metadata", "string", 'null when ""'),
    Column("commit_timestamp_ms", "int64", "commit time"),
    Column("expire_timestamp_ms", "int64", "V1 only; null when -1"),
    Column("topic_id", "string", "V4 tag 0 (Kafka 4.1+), Kafka base64; null when absent"),
    Column(
        "payload",
        "binary",
        "the typed record (`decoders.payload`) for every non-offset type and commits with unknown tags",
    ),
    Column("ambiguous_layout", "bool", "several share layouts fitted", nullable=False, shuffled=False),
    Column("error_part", "string", '"key" | "value" when status == "error"', error=True),
    Column("error_field", "string", 'e.g. "members[1].clientHost"', error=True),
    Column("error_position", "int32", "byte offset within key/value", error=True),
    Column("error_kind", "string", "`decoders.records.ErrorKind`: the metric label", error=True),
    Column("error_reason", "string", "the problem in words, for humans", error=True),
    Column("source_partition", "int32", "__consumer_offsets partition", nullable=False, error=True),
    Column("source_offset", "int64", "log offset", nullable=False, error=True),
    Column("source_timestamp_ms", "int64", "record timestamp", nullable=False, error=True),
    Column(
        "n_commits",
        "int32",
        "offset-commit values the (collapsed) row stands for",
        nullable=False,
        stage="collapse",
    ),
    Column("n_tombstones", "int32", "offset tombstones the row stands for", nullable=False, stage="collapse"),
)

#: what the batch decoder writes, in order
DECODED: Final = tuple(c for c in COLUMNS if c.stage == "decode")
#: the packed group's columns, in pack order
SHUFFLED: Final = tuple(c.name for c in COLUMNS if c.shuffled)
#: an error row's columns (plus the group id, the grouping key)
ERROR_FIELDS: Final = tuple(c.name for c in COLUMNS if c.error)


def spark_ddl(columns: tuple[Column, ...]) -> str:
    """The schema string Spark's ``mapInArrow`` wants."""
    return ", ".join(f"{c.name} {SPARK_TYPES[c.type]}" for c in columns)


def _check() -> None:
    names = [c.name for c in COLUMNS]
    assert len(set(names)) == len(names), "duplicate column names"
    stages = [c.stage for c in COLUMNS]
    assert stages == sorted(stages, key=("decode", "collapse").index), "collapse columns come last"
    assert set(ERROR_FIELDS) <= set(SHUFFLED), "error rows are built from the packed columns"


_check()
