"""Cheapen per-task costs in Spark's Python workers (applied the first time our code runs there).

A reused worker runs a full ``gc.collect()`` after every task (``pyspark.daemon``): ~35 ms of
CPU over the ~80k objects of pandas, pyarrow, PySpark and our modules, times 55 tasks per
micro-batch.  Those objects live as long as the worker, so they are moved to the permanent
generation once (``gc.freeze()``, made for exactly this pre-fork case); the per-task collection then
walks only what tasks allocate.  Frozen objects are still freed by reference counting; only a
reference cycle alive at the moment of freezing would never be collected, and apply() runs before
the task's own data exists.  (tests/test_streaming/test_pipeline/test_spark_workarounds.py fails once PySpark
stops collecting after every task: then this module can go.)

PySpark 4.0's workers also called ``importlib.invalidate_caches()`` before every task, which made
each ``zipimporter`` re-read ``pyspark.zip`` and the spark-core jar; a patch here skipped that.
PySpark 4.2 calls it only when a task adds a path, so the patch is gone.
"""

from __future__ import annotations

import gc

_applied: list[bool] = []


def apply() -> None:
    if _applied:
        return
    _applied.append(True)
    _freeze_long_lived()


def _freeze_long_lived() -> None:
    # import what every task of ours uses, then freeze: the modules join the permanent generation
    import msgpack  # noqa: F401
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401

    import decoders  # noqa: F401
    import state.fold  # noqa: F401

    gc.collect()
    gc.freeze()
