"""How the streaming query runs, as the driver sees it: the decode counts observed per batch, the
last batches' progress, and whether the query runs now.

Written by the progress follower (`streaming.pipeline.progress`) and read by the exporter
(`streaming.serving.metrics`), which holds it as a typed input: the exporter never reaches into
the application object.  Thread-safe: one writer thread, any number of scrapes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

#: batches of progress kept (the exporter folds them into counters as they arrive)
HISTORY_KEPT: Final = 100


class RunStatus:
    def __init__(self, query_running: Callable[[], bool] | None = None) -> None:
        self._lock = threading.Lock()
        #: decode counts summed over every batch (`streaming.pipeline.prepare.counter_names`)
        self.observed: dict[str, int] = {}
        #: the last `HISTORY_KEPT` batches: batch id, input rows, durations, state rows and bytes
        self.progress_history: list[dict[str, Any]] = []
        #: whether the streaming query runs now (``coordinator_mirror_query_healthy``); None: no
        #: query to ask (then the store's last failure decides)
        self.query_running = query_running

    def add_observed(self, counts: Mapping[str, Any]) -> None:
        """One batch's observed aggregates (None and 0 add nothing)."""
        with self._lock:
            for key, value in counts.items():
                if value:
                    self.observed[key] = self.observed.get(key, 0) + int(value)

    def add_batch(self, entry: dict[str, Any]) -> None:
        """One completed batch's progress (`streaming.pipeline.progress.batch_entry`)."""
        with self._lock:
            self.progress_history.append(entry)
            del self.progress_history[:-HISTORY_KEPT]

    def observed_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self.observed)

    def history(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.progress_history)

    def healthy(self, failure: str | None) -> bool:
        """The query runs (asked of it), or -- with no query to ask -- no failure is recorded."""
        if self.query_running is None:
            return failure is None
        try:
            return bool(self.query_running())
        except Exception:  # the JVM side is gone: that is an unhealthy query, not a failed scrape
            return False
