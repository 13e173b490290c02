"""The backfill folded on the driver, and the seed that hands its state to the query.

A new checkpoint starts with the whole of `__consumer_offsets` to fold.  Through the query, that
is one micro-batch that reads every record through Spark's Kafka source and pays
``applyInPandasWithState``'s per-group cost for every group -- with the JVM still cold, and only
after Spark's session is up (docs/performance.md: 15-20 s of a 25-30 s start at 1 M records).
With ``backfill: driver`` the driver folds it instead, while Spark's JVM starts:

1. the records, read by Kafka's own consumer in the client JVM (`streaming.cluster.topic_read`),
   go through the query's own decode step (`streaming.pipeline.prepare.make_decode_collapse_pack`,
   the same code, in this process) and are gathered per group;
2. every group is folded once by the query's own group function (`adapter.fold_cells`), with a
   stand-in for Spark's ``GroupState`` (`DriverGroupState`): the output rows -- snapshots, events,
   the offsets feed, errors, quarantines -- are what the query's first batch would have made, and
   go through the sink the same way (`streaming.pipeline.sinks.MirrorSink.apply_backfill`);
3. each group's state row becomes a *seed cell* (`streaming.pipeline.adapter.seed_cell`) in a
   Parquet file under the checkpoint (``<checkpoint>/seed``), which the query reads as a second
   input stream (`seed_source`) beside the Kafka source, which starts at the offsets the driver
   read up to.  Batch 0 thus stores every group's state (the seed) and sets its timeout (the
   deadline is in the cell), and emits nothing for a group with no new record: the driver
   applied its outputs, and a restart before batch 0 is committed rebuilds the driver's store
   from the seed (`streaming.pipeline.recovery.recover_snapshots`).  ``applyInPandasWithState``
   takes no initial state; this is how it gets one.

The mirror is ready once the driver's fold is applied and the query started; the seed batch runs
after that (its cost is ``applyInPandasWithState``'s per-group floor, off the path to ready).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from state.config import OffsetConfig
from streaming.pipeline.adapter import OUTPUT_COLUMNS, fold_cells, seed_cell
from streaming.pipeline.prepare import GroupFilter, counter_names, make_decode_collapse_pack

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the folder under the checkpoint holding the seed (its presence selects the seeded plan)
SEED_FOLDER: Final = "seed"
SEED_DDL: Final = "group_id string, packed binary"
#: the seed's file in that folder (the driver's backfill); wakes are files there too (`write_wake`)
SEED_FILE: Final = "seed.parquet"

#: one output row of the group function, as the sink reads a collected Spark row (by attribute)
OutputRow = collections.namedtuple("OutputRow", OUTPUT_COLUMNS)  # type: ignore[misc]


class DriverGroupState:
    """What the group function uses of Spark's ``GroupState``, for a group folded on the driver."""

    __slots__ = ("_now_ms", "exists", "get", "removed", "timeout_ms")

    hasTimedOut: Final = False  # noqa: N815 -- Spark's name

    def __init__(self, now_ms: int) -> None:
        self.get: tuple[int, bytes] | None = None
        self.exists = False
        self.removed = False
        self.timeout_ms: int | None = None
        self._now_ms = now_ms

    def getCurrentProcessingTimeMs(self) -> int:  # noqa: N802 -- Spark's name
        return self._now_ms

    def update(self, value: tuple[int, bytes]) -> None:
        self.get, self.exists, self.removed = (int(value[0]), bytes(value[1])), True, False

    def remove(self) -> None:
        self.get, self.exists, self.removed = None, False, True

    def setTimeoutDuration(self, duration_ms: int) -> None:  # noqa: N802 -- Spark's name
        self.timeout_ms = int(duration_ms)

    def new_call(self) -> DriverGroupState:
        """Before each call, as Spark does: a timeout lasts until the next call (which sets it
        again, or leaves the group without one)."""
        self.timeout_ms = None
        return self

    @property
    def deadline_ms(self) -> int | None:
        """When the timeout the last call set is due (epoch ms)."""
        return None if self.timeout_ms is None else self._now_ms + self.timeout_ms


@dataclass
class Backfill:
    """What the driver's fold made."""

    #: the output rows, as the query's first batch would have made them (offset rows included
    #: only when the offsets feed is on)
    rows: list[Any] = field(default_factory=list)
    #: (group id, seed cell) of every group with a state row (deleted groups have none)
    seeds: list[tuple[str, bytes]] = field(default_factory=list)
    #: the decode counts, as the query observes them (`streaming.pipeline.query.observed_columns`)
    observed: dict[str, int] = field(default_factory=dict)
    groups: int = 0
    read_s: float = 0.0
    fold_s: float = 0.0


def fold_backfill(
    batches: Iterable[pa.RecordBatch],
    config: OffsetConfig,
    keep: GroupFilter,
    *,
    emit_offsets: bool,
    now_ms: int,
    records_per_fold: int = 5_000_000,
) -> Backfill:
    """Decode, collapse and pack ``batches`` (raw Kafka rows, `streaming.cluster.topic_read`) with
    the query's own step, then fold the groups with the query's own group function -- once per
    ``records_per_fold`` records read (the query's ``max_offsets_per_trigger``), as the query folds
    a backfill in micro-batches of that many: the packed rows held at once stay bounded however
    large the topic, each group's state carried from one fold to the next."""
    started = time.monotonic()
    out = Backfill()
    names = counter_names()
    totals = np.zeros(len(names), np.int64)
    states: dict[str, DriverGroupState] = {}
    cells: dict[str | None, list[bytes]] = {}
    pending = 0

    def fold() -> None:
        began = time.monotonic()
        for gid, blobs in cells.items():
            state = (
                DriverGroupState(now_ms)
                if gid is None
                else states.setdefault(gid, DriverGroupState(now_ms)).new_call()
            )
            out.rows.extend(OutputRow(*row) for row in fold_cells(gid, blobs, state, config, emit_offsets))
        cells.clear()
        out.fold_s += time.monotonic() - began

    for packed in make_decode_collapse_pack(keep)(batches):
        counts = np.array([pa.compute.sum(packed.column(f"n_{n}")).as_py() or 0 for n in names], np.int64)
        totals += counts
        pending += int(counts[0])  # "records": every record read, collapsed or not
        groups = packed.column("group_id").to_pylist()
        blobs = packed.column("packed").to_pylist()
        for gid, blob in zip(groups, blobs, strict=True):
            if blob:  # a filtered group's row is counted, not folded (as in the query)
                cells.setdefault(gid, []).append(blob)
        if pending >= records_per_fold:
            fold()
            pending = 0
    fold()
    out.observed = {n: int(v) for n, v in zip(names, totals, strict=True) if v}
    out.seeds = [
        (gid, seed_cell(*st.get, st.deadline_ms)) for gid, st in states.items() if st.get is not None
    ]
    out.groups = len(states)
    out.read_s = time.monotonic() - started - out.fold_s
    return out


def seed_path(checkpoint: str) -> str:
    return f"{checkpoint.rstrip('/')}/{SEED_FOLDER}"


def _hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    jpath = spark._jvm.org.apache.hadoop.fs.Path(path)
    return jpath, jpath.getFileSystem(spark._jsc.hadoopConfiguration())


def has_seed(spark: SparkSession, checkpoint: str) -> bool:
    """Whether the checkpoint's query was started with a seed (and so reads it as a source)."""
    path, fs = _hadoop_path(spark, seed_path(checkpoint))
    return bool(fs.exists(path))


def reset_new_checkpoint(spark: SparkSession, checkpoint: str) -> None:
    """Before a new seed: remove what a start that stopped before the query's first batch was
    planned may have left -- its seed, and the sources' logs (``sources/``: the Kafka source's
    starting offsets, the seed source's file list), which would otherwise outlive the seed they
    belong to.  Only for a checkpoint with no micro-batch planned yet (no ``offsets/<n>``)."""
    for folder in (seed_path(checkpoint), f"{checkpoint.rstrip('/')}/sources"):
        path, fs = _hadoop_path(spark, folder)
        if fs.exists(path):
            fs.delete(path, True)


def write_seed(spark: SparkSession, checkpoint: str, seeds: list[tuple[str, bytes]]) -> None:
    """The seed cells as one Parquet file under the checkpoint, made here with pyarrow (a Spark
    job took 2-3 s for 10k groups)."""
    _write_side_file(spark, checkpoint, SEED_FILE, _side_table([g for g, _ in seeds], [c for _, c in seeds]))


def _side_table(groups: list[str], cells: list[bytes]) -> bytes:
    table = pa.table({"group_id": pa.array(groups, pa.string()), "packed": pa.array(cells, pa.binary())})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def _write_side_file(spark: SparkSession, checkpoint: str, name: str, data: bytes) -> None:
    """``data`` as ``<checkpoint>/seed/<name>``: written directly on a local disk, through
    Hadoop's file system anywhere else -- under a hidden name, then renamed: the query's file
    source skips hidden files, so it never sees half a file."""
    folder, fs = _hadoop_path(spark, seed_path(checkpoint))
    fs.mkdirs(folder)
    jvm = spark._jvm
    hidden = jvm.org.apache.hadoop.fs.Path(folder, f".{name}.tmp")
    final = jvm.org.apache.hadoop.fs.Path(folder, name)
    local = local_path(seed_path(checkpoint))
    if local is not None:
        (local / f".{name}.tmp").write_bytes(data)
    else:
        out = fs.create(hidden, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
    if not fs.rename(hidden, final):
        raise OSError(f"could not rename {hidden} to {final}")


def has_seed_file(spark: SparkSession, checkpoint: str) -> bool:
    """Whether the driver's backfill handed a seed to the checkpoint's query (not only wakes)."""
    path, fs = _hadoop_path(spark, f"{seed_path(checkpoint)}/{SEED_FILE}")
    return bool(fs.exists(path))


def add_side_source(spark: SparkSession, checkpoint: str) -> None:
    """A new checkpoint whose query folds its own backfill gets the side input too (an empty
    folder, the seed none): every new checkpoint's query can then be woken (`write_wake`)."""
    folder, fs = _hadoop_path(spark, seed_path(checkpoint))
    fs.mkdirs(folder)


#: an empty Parquet file of the side input's schema: a wake (`write_wake`)
_EMPTY: Final = _side_table([], [])
WAKE_PREFIX: Final = "wake-"


def write_wake(spark: SparkSession, checkpoint: str, at_ms: int) -> str:
    """A file with no rows in the side input: new data for the query's file source, so that the
    query -- which runs no micro-batch without new data -- runs one, and Spark fires every
    expiry timeout due by then in it.  Wakes of earlier batches are removed (`remove_wakes`)."""
    name, data = wake_file(at_ms)
    _write_side_file(spark, checkpoint, name, data)
    return name


def wake_file(at_ms: int) -> tuple[str, bytes]:
    """A wake's file name and bytes (what `write_wake` writes)."""
    return f"{WAKE_PREFIX}{at_ms:013d}.parquet", _EMPTY


def remove_wakes(spark: SparkSession, checkpoint: str, before_ms: int) -> int:
    """Remove the wake files written before ``before_ms`` -- a time by which a micro-batch that
    read them has been committed (a batch run again after a crash reads its files again, so a
    wake is removed only once a later batch was committed).  The file source lists the folder at
    every trigger; its own log keeps one line per file read, whatever is removed."""
    folder, fs = _hadoop_path(spark, seed_path(checkpoint))
    if not fs.exists(folder):
        return 0
    n = 0
    for st in fs.listStatus(folder):
        name = str(st.getPath().getName())
        if name.startswith(WAKE_PREFIX) and name.endswith(".parquet"):
            try:
                written = int(name[len(WAKE_PREFIX) : -len(".parquet")])
            except ValueError:
                continue
            if written < before_ms and fs.delete(st.getPath(), False):
                n += 1
    return n


def local_path(path: str) -> Path | None:
    """A checkpoint path on the local disk as a `Path` (plain or ``file:``); None for another
    file system."""
    if "://" in path and not path.startswith("file:"):
        return None
    return Path(path.removeprefix("file://").removeprefix("file:"))


def seed_source(spark: SparkSession, checkpoint: str) -> DataFrame:
    """The seed as a stream: every cell in the query's first batch, nothing after."""
    return spark.readStream.schema(SEED_DDL).parquet(seed_path(checkpoint))


def starting_offsets(topic: str, ends: Mapping[int, int]) -> str:
    """Spark's Kafka source ``startingOffsets`` JSON: every partition from where the driver's
    read ended."""
    import json

    return json.dumps({topic: {str(p): int(o) for p, o in sorted(ends.items())}})
