"""The capture file: every record of `__consumer_offsets`, bytes kept exactly.

Two encodings of one schema (Spark's Kafka source columns that matter here):

* JSON lines (``*.jsonl``; ``*.jsonl.gz`` compressed) -- one object per record,
  ``{"partition": int, "offset": int, "timestamp": ms, "key": hex, "value": hex | null}``,
  preceded by one header line ``{"capture": {...}}`` (format version, source, broker version,
  isolation level, capture time).  Diffable, and what golden vectors are made from.
* Parquet (``*.parquet``) -- columns ``partition int32, offset int64, timestamp int64 (ms),
  key binary, value binary (null = tombstone)``, header in the file's key/value metadata.
  Compact; what benchmarks and large replays use.

A tombstone keeps ``value = null``; an empty value is ``""`` (zero bytes), never null.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class CapturedRecord:
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True)
class CaptureHeader:
    format: int = FORMAT_VERSION
    source: str = ""
    kafka_version: str | None = None
    isolation_level: str = "read_committed"
    captured_at_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "source": self.source,
            "kafka_version": self.kafka_version,
            "isolation_level": self.isolation_level,
            "captured_at_ms": self.captured_at_ms,
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> CaptureHeader:
        return cls(
            format=int(obj.get("format", FORMAT_VERSION)),
            source=str(obj.get("source", "")),
            kafka_version=obj.get("kafka_version"),
            isolation_level=str(obj.get("isolation_level", "read_committed")),
            captured_at_ms=obj.get("captured_at_ms"),
            extra=dict(obj.get("extra") or {}),
        )


class CaptureFormatError(ValueError):
    """A capture file that does not follow the format above (names the file and line)."""


def _is_parquet(path: Path) -> bool:
    return path.suffix == ".parquet"


def _open_text(path: Path, mode: str, gz: bool | None = None) -> IO[str]:
    if path.name.endswith(".gz") if gz is None else gz:
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def record_to_json(rec: CapturedRecord) -> dict[str, Any]:
    return {
        "partition": rec.partition,
        "offset": rec.offset,
        "timestamp": rec.timestamp_ms,
        "key": rec.key.hex(),
        "value": None if rec.value is None else rec.value.hex(),
    }


def record_from_json(obj: dict[str, Any]) -> CapturedRecord:
    value = obj["value"]
    return CapturedRecord(
        partition=int(obj["partition"]),
        offset=int(obj["offset"]),
        timestamp_ms=int(obj["timestamp"]),
        key=bytes.fromhex(obj["key"]),
        value=None if value is None else bytes.fromhex(value),
    )


def write_capture(path: str | Path, header: CaptureHeader, records: Iterable[CapturedRecord]) -> int:
    """Write ``records`` to ``path`` (format chosen by suffix); returns the number written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name + ".tmp")
    if _is_parquet(path):
        n = _write_parquet(tmp, header, records)
    else:
        n = 0
        with _open_text(tmp, "w", gz=path.name.endswith(".gz")) as fh:
            fh.write(json.dumps({"capture": header.to_json()}) + "\n")
            for rec in records:
                fh.write(json.dumps(record_to_json(rec), separators=(",", ":")) + "\n")
                n += 1
    tmp.replace(path)  # atomic: a reader never sees half a capture
    return n


def _write_parquet(path: Path, header: CaptureHeader, records: Iterable[CapturedRecord]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            pa.field("partition", pa.int32(), nullable=False),
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("timestamp", pa.int64(), nullable=False),
            pa.field("key", pa.binary(), nullable=False),
            pa.field("value", pa.binary(), nullable=True),
        ],
        metadata={b"capture": json.dumps(header.to_json()).encode()},
    )
    n = 0
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        cols: dict[str, list[Any]] = {name: [] for name in schema.names}

        def flush() -> None:
            writer.write_table(pa.table(cols, schema=schema))
            for col in cols.values():
                col.clear()

        for rec in records:
            cols["partition"].append(rec.partition)
            cols["offset"].append(rec.offset)
            cols["timestamp"].append(rec.timestamp_ms)
            cols["key"].append(rec.key)
            cols["value"].append(rec.value)
            n += 1
            if len(cols["key"]) >= 65536:
                flush()
        flush()
    return n


def read_header(path: str | Path) -> CaptureHeader:
    path = Path(path)
    if _is_parquet(path):
        import pyarrow.parquet as pq

        meta = pq.read_schema(path).metadata or {}
        raw = meta.get(b"capture")
        return CaptureHeader.from_json(json.loads(raw)) if raw else CaptureHeader()
    with _open_text(path, "r") as fh:
        first = fh.readline()
    try:
        obj = json.loads(first) if first.strip() else {}
    except json.JSONDecodeError as exc:
        raise CaptureFormatError(f"{path}:1: not JSON: {exc}") from exc
    return CaptureHeader.from_json(obj["capture"]) if "capture" in obj else CaptureHeader()


def read_capture(path: str | Path) -> Iterator[CapturedRecord]:
    """Yield the records of a capture file in file order (partition/offset order as written)."""
    path = Path(path)
    if _is_parquet(path):
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=65536):
            d = batch.to_pydict()
            for p, o, t, k, v in zip(
                d["partition"], d["offset"], d["timestamp"], d["key"], d["value"], strict=True
            ):
                yield CapturedRecord(p, o, t, k, v)
        return
    with _open_text(path, "r") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if "capture" in obj:
                    continue
                yield record_from_json(obj)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise CaptureFormatError(f"{path}:{lineno}: {exc!r}") from exc
