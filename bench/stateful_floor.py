"""What PySpark's applyInPandasWithState costs per group before our code runs (no Kafka needed).

    .venv/bin/python -m bench.stateful_floor [--groups 10000] [--columns 2 4 25] [--rounds 3]

A streaming query over a Parquet directory holding one row per group and ``--columns`` columns
(group id + alternating string/long columns), ``groupBy(group id).applyInPandasWithState`` with a
function that only iterates its frames, reads its state and stores an 800-byte state -- the
framework's floor.  One query on one checkpoint: round 0's micro-batch creates every group's state
(and includes JIT warm-up and worker start), each later round feeds the same groups again, which
then find their state in the store (the JVM reads and pickles it, Python unpickles it: the
mirror's steady state).  ``addBatch`` of every round is printed, and the cost per group.

Why it matters: PySpark builds one pandas Series per column per group on the way in, and a state
DataFrame per group on the way out, so the floor grows with the number of columns.  The mirror
therefore packs each group's rows into one binary column before the shuffle
(`streaming.pipeline.prepare.pack_groups`).  Figures are printed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any


def noop_fold(key: tuple[Any, ...], frames: Iterator[Any], state: Any) -> Iterator[Any]:
    import pandas as pd

    rows = sum(len(f) for f in frames)
    if state.exists:
        rows += 0 * len(state.get[1])  # read it, as a real function does
    state.update((1, b"x" * 800))
    yield pd.DataFrame({"group_id": [key[0]], "rows": [rows]})


def run(spark: Any, workdir: str, groups: int, columns: int, rounds: int) -> list[float]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.streaming.state import GroupStateTimeout

    src = os.path.join(workdir, f"src-{columns}")
    os.makedirs(src)
    data: dict[str, Any] = {"group_id": [f"group-{i}" for i in range(groups)]}
    for c in range(columns - 1):
        data[f"c{c}"] = np.arange(groups, dtype=np.int64) if c % 2 else [f"v{i}" for i in range(groups)]
    table = pa.table(data)
    pq.write_table(table, os.path.join(src, "part-0.parquet"))
    schema = spark.read.parquet(src).schema
    out = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(src)
        .groupBy("group_id")
        .applyInPandasWithState(
            noop_fold,
            "group_id string, rows long",
            "v int, blob binary",
            "update",
            GroupStateTimeout.ProcessingTimeTimeout,
        )
    )
    # One query on one checkpoint: batch 0 creates every group's state, each later batch (one new
    # file with the same groups) finds it there -- the JVM reads and pickles it, Python unpickles,
    # as in the mirror's steady state.
    query = (
        out.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", os.path.join(workdir, f"ck-{columns}"))
        .trigger(processingTime="1 second")
        .start()
    )
    times = []
    for r in range(rounds):
        if r:
            pq.write_table(table, os.path.join(src, f"part-{r}.parquet"))
        progress = None
        while progress is None:
            time.sleep(0.2)
            # (the processing-time timeout makes Spark run no-data batches in between: skipped)
            with_data = [p for p in query.recentProgress if p.numInputRows > 0]
            progress = with_data[r] if len(with_data) > r else None
        times.append(progress.durationMs["addBatch"] / 1000)
    query.stop()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--columns", type=int, nargs="+", default=[2, 4, 25])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shuffle-partitions", type=int, default=4)
    args = ap.parse_args()

    from streaming.pipeline.session import build_session

    spark = build_session(
        conf={"spark.sql.shuffle.partitions": str(args.shuffle_partitions), "spark.ui.enabled": "false"},
        # stopping a query mid-batch (each column count's query stops right after its last round)
        # logs task kills
        log_level="OFF",
    )
    print(
        f"applyInPandasWithState floor: {args.groups} groups, 1 row each, no-op function, "
        f"{spark.sparkContext.defaultParallelism} cores"
    )
    with tempfile.TemporaryDirectory(prefix="stateful-floor-") as workdir:
        for columns in args.columns:
            times = run(spark, workdir, args.groups, columns, args.rounds)
            best = min(times[1:] or times)
            print(
                f"  {columns:3d} columns: addBatch {' / '.join(f'{t:.2f}' for t in times)} s"
                f" (round 0 creates the state); best with existing state {best:.2f} s"
                f" = {best / args.groups * 1000:.3f} ms per group (wall)"
            )
    spark.stop()


if __name__ == "__main__":
    main()
