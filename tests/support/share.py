"""`__share_group_state` records built by hand, one partition of the topic being written (the share
fold's tests and the driver's share store's)."""

from __future__ import annotations

from typing import Any

from decoders.records import (
    Record,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateBatch,
    ShareUpdateValue,
    Source,
)

T0 = 1_790_000_000_000


class ShareLog:
    """One `__share_group_state` partition being written (positions and time advance per record)."""

    def __init__(self, partition: int = 0) -> None:
        self.partition, self.offset, self.now = partition, 0, T0
        self.records: list[Any] = []

    def _src(self) -> Source:
        self.offset += 1
        self.now += 10
        return Source(self.partition, self.offset, self.now)

    def snapshot(
        self, p: int, start: int | None, *batches: tuple[int, int, int, int], dcc: int | None = None
    ) -> None:
        v = ShareSnapshotValue(1, 0, 0, start, tuple(ShareStateBatch(*b) for b in batches), dcc, T0, T0)
        self.records.append(Record(self._src(), 0, SharePartitionKey("sg", "TID", p), 0, v))

    def update(
        self, p: int, start: int | None, *batches: tuple[int, int, int, int], dcc: int | None = None
    ) -> None:
        v = ShareUpdateValue(1, None, start, tuple(ShareStateBatch(*b) for b in batches), dcc)
        self.records.append(Record(self._src(), 1, SharePartitionKey("sg", "TID", p), 0, v))

    def tombstone(self, p: int) -> None:
        self.records.append(Record(self._src(), 0, SharePartitionKey("sg", "TID", p), None, None))
