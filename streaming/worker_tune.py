"""Cheapen a per-task cost in Spark's Python workers (applied the first time our code runs there).

Before every task a PySpark worker calls ``importlib.invalidate_caches()``
(``pyspark.worker_util.setup_spark_files``).  On Python 3.11 that makes every ``zipimporter`` on
``sys.path`` re-read its archive's whole central directory -- and a pip-installed PySpark puts
``pyspark.zip`` (~1,200 entries) and ``spark-core_2.13-*.jar`` (~5,300 entries) on the workers'
``PYTHONPATH``.  Profiled with py-spy in ``bench/pipeline.py``, that re-read was 29 % of the workers'
time in a 10k-group micro-batch (55 tasks: one per ``__consumer_offsets`` partition, plus the
stateful stage).  Those archives never change while a worker lives, so the re-read is skipped for
archives already read; an archive added later (``addPyFile``) still gets a fresh importer.  On a
Python whose zipimporter keeps no ``_files`` (newer ones read lazily) the patch changes nothing.
"""

from __future__ import annotations

import zipimport


def apply() -> None:
    original = zipimport.zipimporter.invalidate_caches
    if getattr(original, "_skips_known_archives", False):
        return

    def invalidate_caches(self: zipimport.zipimporter) -> None:
        if getattr(self, "_files", None):  # already read: the archive is immutable for us
            return
        original(self)

    invalidate_caches._skips_known_archives = True  # type: ignore[attr-defined]
    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]
