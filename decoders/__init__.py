"""Bytes of `__consumer_offsets` records -> typed, frozen records (pure Python: no Spark, no I/O).

Public API (see decoders/README.md):

* `decode_record(key, value, source)` -> `Record` | `UnknownRecord` | `DecodeError` (never raises)
* `decode_arrow(batch)` -- the vectorized batch decoder; its columns are declared once in
  `decoders.columns` (`OUTPUT_SCHEMA`, `OUTPUT_SPARK_DDL`, `arrow_schema` bind them for Arrow/Spark)
* `payload_to_record(payload, source)` -- the batch output's ``payload`` cell back to a typed `Record`
* `ErrorKind` -- the closed set of `DecodeError` kinds (the metric label)
* `record_json(key, value, source)` -- Kafka-formatter-shaped JSON (the ``decode`` command)
* `RECORD_TYPES` -- the registry K -> (key struct, value family, typed classes)
* `decode_share_state_record(key, value, source)`, `SHARE_STATE_RECORD_TYPES` -- the same for
  `__share_group_state` (KIP-932's ShareSnapshot / ShareUpdate); `REGISTRIES` maps topic -> registry

The batch names are loaded lazily (PEP 562) so that per-record users -- the ``decode`` command,
the state layer -- do not pay for importing numpy/pyarrow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from decoders.decode import decode_raw, decode_record, decode_share_state_record
from decoders.kafka_json import record_json
from decoders.payload import payload_to_record, record_to_payload
from decoders.records import (
    NO_SOURCE,
    DecodeError,
    DecodeResult,
    ErrorKind,
    Record,
    Source,
    UnknownRecord,
)
from decoders.tables import RECORD_TYPES, REGISTRIES, SHARE_GROUP_STATE_TOPIC, SHARE_STATE_RECORD_TYPES

if TYPE_CHECKING:
    from decoders.batch import OUTPUT_SCHEMA, OUTPUT_SPARK_DDL, arrow_schema, decode_arrow

_BATCH_NAMES = frozenset({"OUTPUT_SCHEMA", "OUTPUT_SPARK_DDL", "arrow_schema", "decode_arrow"})


def __getattr__(name: str) -> Any:
    if name in _BATCH_NAMES:
        return getattr(importlib.import_module("decoders.batch"), name)
    raise AttributeError(f"module 'decoders' has no attribute {name!r}")


__all__ = [
    "NO_SOURCE",
    "OUTPUT_SCHEMA",
    "OUTPUT_SPARK_DDL",
    "RECORD_TYPES",
    "REGISTRIES",
    "SHARE_GROUP_STATE_TOPIC",
    "SHARE_STATE_RECORD_TYPES",
    "DecodeError",
    "DecodeResult",
    "ErrorKind",
    "Record",
    "Source",
    "UnknownRecord",
    "arrow_schema",
    "decode_arrow",
    "decode_raw",
    "decode_record",
    "decode_share_state_record",
    "payload_to_record",
    "record_json",
    "record_to_payload",
]
