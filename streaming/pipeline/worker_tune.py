"""Cheapen per-task costs in Spark's Python workers (applied the first time our code runs there).

Before every task a PySpark worker calls ``importlib.invalidate_caches()``
(``pyspark.worker_util.setup_spark_files``).  On Python 3.11 that makes every ``zipimporter`` on
``sys.path`` re-read its archive's whole central directory -- and a pip-installed PySpark puts
``pyspark.zip`` (~1,200 entries) and ``spark-core_2.13-*.jar`` (~5,300 entries) on the workers'
``PYTHONPATH``.  Profiled with py-spy in ``bench/pipeline.py``, that re-read was 29 % of the workers'
time in a 10k-group micro-batch (55 tasks: one per ``__consumer_offsets`` partition, plus the
stateful stage).  Those archives never change while a worker lives, so the re-read is skipped for
archives already read; an archive added later (``addPyFile``) still gets a fresh importer.  On a
Python whose zipimporter keeps no ``_files`` (newer ones read lazily) the patch changes nothing.

A reused worker also runs a full ``gc.collect()`` after every task (``pyspark.daemon``): ~35 ms of
CPU over the ~80k objects of pandas, pyarrow, PySpark and our modules, times 55 tasks per
micro-batch.  Those objects live as long as the worker, so they are moved to the permanent
generation once (``gc.freeze()``, made for exactly this pre-fork case); the per-task collection then
walks only what tasks allocate.  Frozen objects are still freed by reference counting; only a
reference cycle alive at the moment of freezing would never be collected, and apply() runs before
the task's own data exists.
"""

from __future__ import annotations

import gc
import zipimport


def apply() -> None:
    original = zipimport.zipimporter.invalidate_caches
    if getattr(original, "_skips_known_archives", False):
        return
    _freeze_long_lived()

    def invalidate_caches(self: zipimport.zipimporter) -> None:
        if getattr(self, "_files", None):  # already read: the archive is immutable for us
            return
        original(self)

    invalidate_caches._skips_known_archives = True  # type: ignore[attr-defined]
    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]


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
