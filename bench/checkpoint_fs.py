"""What one checkpoint file costs: Hadoop's stock local file system against ours (jvm/localfs).

    .venv/bin/python -m bench.checkpoint_fs [--files 100] [--driver-memory 6g]

Spark writes every checkpoint file -- offset log, commit log, each state partition's changelog --
through its checkpoint manager: a temporary file created, written, closed and renamed into place.
This writes ``--files`` such files into a local folder through Spark's own FileContext-based
manager, once over Hadoop's stock ``LocalFs`` and once over the session's (ours), in one Spark JVM,
and prints the wall time per file and the child processes' page faults the JVM reaped meanwhile
(> 0: processes were spawned).  The JVM's heap size matters for the stock figure: each spawned
process starts from a copy of the JVM's address space.  Figures are printed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from lab.checkpoint_fs import reaped_child_faults, stock_checkpoint_manager


def write_files(spark: Any, manager: Any, folder: str, n: int) -> tuple[float, int]:
    jvm = spark._jvm
    payload = bytearray(b"v1\n" + b"x" * 200)
    faults = reaped_child_faults(spark)
    started = time.perf_counter()
    for i in range(n):
        out = manager.createAtomic(jvm.org.apache.hadoop.fs.Path(f"file://{folder}/{i}"), False)
        out.write(payload)
        out.close()
    return (time.perf_counter() - started) / n, reaped_child_faults(spark) - faults


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--driver-memory", default="6g", help="the mirror's bench sessions use 6g")
    args = ap.parse_args()

    from streaming.pipeline.session import build_session

    spark = build_session(conf={"spark.ui.enabled": "false", "spark.driver.memory": args.driver_memory})
    jvm = spark._jvm
    cfm = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    print(
        f"{args.files} checkpoint files each (create, write, close, rename), "
        f"driver memory {args.driver_memory}"
    )
    with tempfile.TemporaryDirectory(prefix="checkpoint-fs-") as tmp:
        for name in ("stock LocalFs", "ours"):
            folder = Path(tmp) / name.replace(" ", "-")
            (folder / "warm").mkdir(parents=True)
            if name == "ours":
                manager = cfm.create(
                    jvm.org.apache.hadoop.fs.Path(f"file://{folder}"), spark._jsc.hadoopConfiguration()
                )
            else:
                manager = stock_checkpoint_manager(spark, folder)
            write_files(spark, manager, str(folder / "warm"), 10)  # class loading, JIT
            per_file, faults = write_files(spark, manager, str(folder), args.files)
            print(f"  {name:14s} {per_file * 1000:7.2f} ms per file, child-process faults {faults:8d}")
    spark.stop()


if __name__ == "__main__":
    main()
