"""PySpark's GroupState stood in for, so that the query's group function runs without Spark the way
applyInPandasWithState calls it (`call`), and its output rows picked by kind."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa

from streaming.pipeline.adapter import OUTPUT_COLUMNS
from streaming.pipeline.prepare import decode_collapse_pack
from tests.support.records import T0


class FakeGroupState:
    """The part of pyspark.sql.streaming.state.GroupState the adapter uses."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.row: tuple[int, bytes] | None = None
        self.timeout_ms: int | None = None
        self.hasTimedOut = False

    @property
    def exists(self) -> bool:
        return self.row is not None

    @property
    def get(self) -> tuple[int, bytes]:
        assert self.row is not None
        return self.row

    def update(self, row: tuple[int, bytes]) -> None:
        self.row = row

    def remove(self) -> None:
        self.row = None

    def setTimeoutDuration(self, ms: int) -> None:  # noqa: N802 - PySpark's name
        self.timeout_ms = ms

    def getCurrentProcessingTimeMs(self) -> int:  # noqa: N802 - PySpark's name
        return self.now_ms


def call(
    fn: Any, state: FakeGroupState, rows: list[tuple[bytes, bytes | None]], first_offset: int
) -> list[dict[str, Any]]:
    """One trigger for group "g": the rows as the query packs them, then the group function."""
    raw = pa.RecordBatch.from_pydict(
        {
            "key": pa.array([k for k, _ in rows], pa.binary()),
            "value": pa.array([v for _, v in rows], pa.binary()),
            "partition": pa.array([0] * len(rows), pa.int32()),
            "offset": pa.array(range(first_offset, first_offset + len(rows)), pa.int64()),
            "timestamp": pa.array([T0 + first_offset + i for i in range(len(rows))], pa.int64()),
        }
    )
    packed = pa.Table.from_batches(list(decode_collapse_pack([raw]))).to_pandas()
    assert packed["group_id"].tolist() == ["g"]
    frames = iter([packed[["group_id", "packed"]]])
    out = list(fn(("g",), frames, state))
    assert all(list(f.columns) == list(OUTPUT_COLUMNS) for f in out)
    return pd.concat(out).to_dict("records") if out else []


def of_kind(rows: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["kind"] == kind]
