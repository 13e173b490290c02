"""The query supervisor: the ``mirror-supervisor`` thread.  Waits for the topic on a new cluster,
restarts a failed query from the checkpoint with backoff (`RestartPolicy`), checks the source,
keeps the checkpoint's ``mirror.json`` current and runs the reconciliation rounds.

Everything it acts on is handed in -- the query's holder (`QueryRun`), callables that begin or
restart the query, check the source, keep the checkpoint's meta, reconcile -- and `step` takes
the time as an argument, so tests/test_streaming/test_app/test_supervisor.py drives it with fakes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from streaming.app.errors import (
    EXIT_AUTHENTICATION,
    EXIT_AUTHORIZATION,
    EXIT_CONFIG,
    EXIT_CONNECTOR,
    EXIT_TLS,
    StartupError,
    classify,
    first_line,
    scrub,
)
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("coordinator_mirror")

#: query failures no restart fixes: settings, connector jars, credentials, certificates, ACLs
FATAL: Final = frozenset({EXIT_CONFIG, EXIT_CONNECTOR, EXIT_AUTHENTICATION, EXIT_TLS, EXIT_AUTHORIZATION})


class Query(Protocol):
    """What the supervisor asks of a streaming query."""

    @property
    def isActive(self) -> bool: ...  # noqa: N802 (Spark's name)
    def exception(self) -> object | None: ...


@dataclass
class QueryRun:
    """The running query (None: not started yet -- waiting for the topic) and the failure the
    process should end for (a cause no restart can fix)."""

    query: StreamingQuery | None = None
    fatal: StartupError | None = None


class RestartPolicy:
    """Which failures a restart can fix, and when to restart: ``backoff_s * 2**(n-1)`` after the
    n-th failure in a row, at most ``backoff_max_s``."""

    def __init__(
        self,
        backoff_s: float,
        backoff_max_s: float,
        bootstrap: str | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.bootstrap = bootstrap
        self.secrets = tuple(secrets)

    def delay(self, failures: int) -> float:
        return float(min(self.backoff_max_s, self.backoff_s * 2 ** (failures - 1)))

    def fatal(self, text: str) -> StartupError | None:
        """The cause of a query failure, when no restart can fix it."""
        cause = classify(RuntimeError(text), bootstrap=self.bootstrap, secrets=self.secrets)
        return cause if cause.exit_code in FATAL else None

    def describe(self, text: str) -> str:
        return scrub(first_line(text), self.secrets)


class QuerySupervisor:
    def __init__(
        self,
        settings: Settings,
        store: SnapshotStore,
        run: QueryRun,
        policy: RestartPolicy,
        *,
        begin: Callable[[], StreamingQuery | None],
        restart: Callable[[], StreamingQuery],
        check_source: Callable[[], None] | None = None,
        keep_meta: Callable[[], None] = lambda: None,
        reconcile: Callable[[], bool] | None = None,
        housekeeping: Sequence[Callable[[float], object]] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.store = store
        self.run = run
        self.policy = policy
        self.begin = begin
        self.restart = restart
        self.check_source = check_source
        self.keep_meta = keep_meta
        self.reconcile = reconcile
        #: called with the time at every step while the query runs (`streaming.app.heap`)
        self.housekeeping = list(housekeeping)
        self.clock = clock
        self.failures = 0
        self.restart_at: float | None = None
        self._next_topic_check = self._next_source_check = 0.0
        self._next_reconcile = clock() + (settings.reconcile_interval_s or 0)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="mirror-supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _loop(self) -> None:
        while not self._stopped.wait(0.25):
            try:
                if not self.step(self.clock()):
                    return
            except Exception:  # the supervisor must outlive anything it supervises
                if self._stopped.is_set():
                    return
                log.exception("supervisor step failed")

    def step(self, now: float) -> bool:
        """One look at the query; False: gave up (a failure no restart can fix)."""
        s = self.settings
        status = self.store.status
        if self.check_source is not None and now >= self._next_source_check:
            self._next_source_check = now + s.source_check_interval_s
            self.check_source()
        q = self.run.query
        if q is None:
            if now >= self._next_topic_check:
                self._next_topic_check = now + s.topic_wait_interval_s
                if status.source_up:
                    self.run.query = self.begin()
                    if self.run.query is not None:
                        log.info("%s appeared: mirroring starts", s.topic)
            return True
        if not q.isActive:
            if self.restart_at is None:
                self.failures += 1
                self.restart_at = self._on_failure(q)
                if self.restart_at is None:
                    return False
            if now >= self.restart_at and status.source_up:
                self.restart_at = None
                self.run.query = self.restart()
                status.query_restarts += 1
                self.store.failure = None
                log.info("query restarted from the checkpoint (restart %d)", self.failures)
            return True
        if self.store.last_batch.batch_id >= 0 and self.restart_at is None and self.store.readiness.ready:
            self.failures = 0
        self.keep_meta()
        reconcile = self.reconcile if s.reconcile_interval_s and self.store.readiness.ready else None
        if reconcile is not None and (now >= self._next_reconcile or status.possible_missed_tombstones):
            self._next_reconcile = now + s.reconcile_interval_s
            status.possible_missed_tombstones = False
            reconcile()
        for chore in self.housekeeping:
            chore(now)
        return True

    def _on_failure(self, q: Query) -> float | None:
        """Record a failed query; the time to restart it at, or None to give up (the process then
        exits with the cause's code)."""
        exc = q.exception()
        text = str(exc) if exc is not None else "query stopped"
        self.store.failure = self.policy.describe(text)
        fatal = self.policy.fatal(text)
        if fatal is not None:
            log.error("the mirror's query failed and a restart cannot fix it: %s", fatal.message)
            self.run.fatal = fatal
            return None
        delay = self.policy.delay(self.failures)
        log.error(
            "the mirror's query failed (%s); restarting it from the checkpoint in %.0fs "
            "(failure %d in a row)",
            self.store.failure,
            delay,
            self.failures,
        )
        return self.clock() + delay
