"""The one column contract (`decoders.columns`): the decoder's Arrow schema, the Spark DDL, the
pack order across the shuffle and the error row all come from `COLUMNS`, in its order."""

from __future__ import annotations

import pyarrow as pa

from decoders.batch import OUTPUT_SCHEMA, OUTPUT_SPARK_DDL
from decoders.columns import COLUMNS, DECODED, ERROR_FIELDS, SHUFFLED, SPARK_TYPES, Column, spark_ddl


def test_the_schema_ddl_pack_order_and_error_fields_come_from_one_declaration() -> None:
    assert OUTPUT_SCHEMA.names == [c.name for c in DECODED]
    assert [c.name for c in COLUMNS[len(DECODED) :]] == ["n_commits", "n_tombstones"]
    assert [f.nullable for f in OUTPUT_SCHEMA] == [c.nullable for c in DECODED]
    assert OUTPUT_SCHEMA.field("payload").type == pa.binary()
    assert "payload BINARY" in OUTPUT_SPARK_DDL and "error_kind STRING" in OUTPUT_SPARK_DDL
    assert "group_id" not in SHUFFLED and "payload" in SHUFFLED and SHUFFLED[-1] == "n_tombstones"
    assert set(ERROR_FIELDS) <= set(SHUFFLED) and "error_kind" in ERROR_FIELDS


def test_spark_ddl_names_every_column_with_its_spark_type_in_order() -> None:
    cols = (
        Column("a", "string", ""),
        Column("b", "int16", ""),
        Column("c", "bool", ""),
        Column("d", "binary", ""),
        Column("e", "int64", ""),
        Column("f", "int32", ""),
    )
    assert spark_ddl(cols) == "a STRING, b SMALLINT, c BOOLEAN, d BINARY, e BIGINT, f INT"
    assert spark_ddl(DECODED) == OUTPUT_SPARK_DDL
    assert {c.type for c in COLUMNS} <= set(SPARK_TYPES)


def test_the_contracts_own_rules_hold() -> None:
    """Names unique, the collapse stage's columns last, an error row built from packed columns --
    the module checks these at import; here they are read back from the declaration."""
    names = [c.name for c in COLUMNS]
    assert len(names) == len(set(names))
    stages = [c.stage for c in COLUMNS]
    assert stages == ["decode"] * len(DECODED) + ["collapse"] * (len(COLUMNS) - len(DECODED))
    assert ERROR_FIELDS[0] == "status" and ERROR_FIELDS[-3:] == (
        "source_partition",
        "source_offset",
        "source_timestamp_ms",
    )
    assert not any(c.nullable for c in COLUMNS if c.name.startswith(("source_", "n_")))
