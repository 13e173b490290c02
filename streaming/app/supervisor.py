"""The query supervisor: the ``mirror-supervisor`` thread.  Waits for the topic on a new cluster,
restarts a failed query from the checkpoint with backoff (`RestartPolicy`), checks the source,
keeps the checkpoint's ``mirror.json`` current and runs the reconciliation rounds.

Everything it acts on is handed in -- the query's holder (`QueryRun`), callables that begin or
restart the query, check the source, keep the checkpoint's meta, reconcile -- and `step` takes
the time as an argument, so tests/test_streaming/test_app/test_supervisor.py drives it with fakes.

The parts beside the main query that run a query of their own (the share-state query) are
supervised by `SideQuerySupervisor` with the same `RestartPolicy` -- the same backoff and the same
causes no restart fixes -- and report their health to the mirror's status, never its readiness.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
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
from streaming.lifecycle import Worker
from streaming.serving.status import MirrorStatus
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


class QuerySupervisor(Worker):
    def __init__(
        self,
        settings: Settings,
        status: MirrorStatus,
        run: QueryRun,
        policy: RestartPolicy,
        *,
        begin: Callable[[], StreamingQuery | None],
        restart: Callable[[], StreamingQuery],
        check_source: Callable[[], None] | None = None,
        keep_meta: Callable[[], None] = lambda: None,
        reconcile: Callable[[], bool] | None = None,
        fatal_ends: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__("mirror-supervisor", 0.25)
        #: a failure no restart fixes ends the supervision (the process exits with its code); off
        #: where the process mirrors several clusters: that cluster is retried every backoff_max_s
        #: (credentials fixed, an ACL granted) while the others go on
        self.fatal_ends = fatal_ends
        self.settings = settings
        self.status = status
        self.run = run
        self.policy = policy
        self.begin = begin
        self.restart = restart
        self.check_source = check_source
        self.keep_meta = keep_meta
        self.reconcile = reconcile
        self.clock = clock
        self.failures = 0
        self.restart_at: float | None = None
        self._next_topic_check = self._next_source_check = 0.0
        self._next_reconcile = clock() + (settings.reconcile_interval_s or 0)

    def work(self) -> bool:
        return self.step(self.clock())

    def on_error(self, exc: Exception) -> None:
        # the supervisor must outlive anything it supervises: every failure is logged, and it goes on
        log.error("supervisor step failed", exc_info=exc)

    def step(self, now: float) -> bool:
        """One look at the query; False: gave up (a failure no restart can fix)."""
        s = self.settings
        status = self.status
        if self.check_source is not None and now >= self._next_source_check:
            # twice per interval: a check returns at once and waits at most half the interval for
            # its answer (`streaming.app.startup.SourceCheck`), so an outage shows within one
            self._next_source_check = now + s.source_check_interval_s / 2
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
                status.query_restarted()
                log.info("query restarted from the checkpoint (restart %d)", self.failures)
            return True
        if status.last_batch.batch_id >= 0 and self.restart_at is None and status.ready:
            self.failures = 0
        self.keep_meta()
        # not while the source check finds the cluster down: ListGroups would block this thread
        # for the client's whole API timeout (30 s) and hold up restarts, to count an error round
        reconcile = self.reconcile if s.reconcile_interval_s and status.ready and status.source_up else None
        if reconcile is not None and (now >= self._next_reconcile or status.missed_tombstones):
            self._next_reconcile = now + s.reconcile_interval_s
            status.take_missed_tombstones()
            reconcile()
        return True

    def _on_failure(self, q: Query) -> float | None:
        """Record a failed query; the time to restart it at, or None to give up (the process then
        exits with the cause's code)."""
        exc = q.exception()
        text = str(exc) if exc is not None else "query stopped"
        description = self.policy.describe(text)
        self.status.query_failed(description)
        fatal = self.policy.fatal(text)
        if fatal is not None and self.fatal_ends:
            log.error("the mirror's query failed and a restart cannot fix it: %s", fatal.message)
            self.run.fatal = fatal
            return None
        if fatal is not None:
            self.status.query_failed(fatal.message)
            log.error(
                "cluster %s: the query failed and a restart cannot fix it: %s (trying again every %.0fs; "
                "the other clusters go on)",
                self.settings.cluster_name,
                fatal.message,
                self.policy.backoff_max_s,
            )
            return self.clock() + self.policy.backoff_max_s
        delay = self.policy.delay(self.failures)
        log.error(
            "the mirror's query failed (%s); restarting it from the checkpoint in %.0fs "
            "(failure %d in a row)",
            description,
            delay,
            self.failures,
        )
        return self.clock() + delay


class SideQuery(Protocol):
    """A query beside the main one (the share-state query), as `SideQuerySupervisor` runs it."""

    #: its name in the mirror's status (``/ready``'s ``parts``, the metrics)
    name: str

    def waiting(self) -> str | None:
        """Why it cannot start now (None: it can); raises `PermissionError` when the principal
        may not read what it needs."""
        ...

    def begin(self) -> Query:
        """Start it (from its own checkpoint)."""
        ...

    def end(self, query: Query) -> None:
        """Stop it, between two of its batches."""
        ...

    def describe(self) -> str:
        """A few words for the log line of its start (its topic, its partitions)."""
        ...


class SideQuerySupervisor(Worker):
    """The ``mirror-<name>`` thread: starts a side query when it can, restarts it after a failure
    with the main query's `RestartPolicy` (its backoff; a cause no restart fixes is retried only
    every ``backoff_max_s``), and reports its health -- state, restarts, failures, the last failure
    -- to the mirror's status.  Never fatal for the mirror, never gating its readiness."""

    def __init__(
        self,
        side: SideQuery,
        status: MirrorStatus,
        policy: RestartPolicy,
        *,
        wait_interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(f"mirror-{side.name.replace('_', '-')}", 0.5)
        self.join_timeout_s = 30.0  # a start in progress (recovery, the query's first plan) ends first
        self.name = side.name
        self.side = side
        self.status = status
        self.policy = policy
        self.wait_interval_s = wait_interval_s
        self.clock = clock
        self.query: Query | None = None
        #: failures in a row (reset once the query completed a batch after a restart)
        self.failures = 0
        self._next_try = 0.0
        self._said: str | None = None
        status.part(self.name, state="waiting", reason="not started yet")

    def work(self) -> bool:
        return self.step(self.clock())

    def running(self) -> bool:
        """Whether the side query runs now."""
        q = self.query
        return q is not None and bool(q.isActive)

    def step(self, now: float) -> bool:
        q = self.query
        if q is not None and q.isActive:
            if self.failures and getattr(q, "lastProgress", None) is not None:
                self.failures = 0  # it ran a batch: the next failure starts the backoff afresh
            return True
        if q is not None:
            self.query = None
            exc = q.exception()
            self._failed(now, str(exc) if exc is not None else "query stopped")
            return True
        if now < self._next_try:
            return True
        try:
            waiting = self.side.waiting()
        except PermissionError as exc:
            self._not_authorized(now, str(exc))
            return True
        if waiting is not None:
            self._next_try = now + self.wait_interval_s
            if self.status.part_health(self.name).reason != waiting:
                self.status.part(self.name, state="waiting", reason=waiting)
            return True
        if self.stopping:
            return False
        restarted = self.status.part_health(self.name).state in ("restarting", "failed", "not_authorized")
        try:
            self.query = self.side.begin()
        except Exception as exc:
            self._failed(now, f"{type(exc).__name__}: {exc}")
            return True
        health = self.status.part_health(self.name)
        self.status.part(
            self.name,
            state="running",
            failure=None,
            reason=None,
            restarts=health.restarts + (1 if restarted else 0),
        )
        self._said = None
        if restarted:
            log.info(
                "the %s query restarted from its checkpoint (restart %d)", self.name, health.restarts + 1
            )
        return not self.stopping

    def _failed(self, now: float, text: str) -> None:
        self.failures += 1
        description = self.policy.describe(text)
        fatal = self.policy.fatal(text)
        health = self.status.part_health(self.name)
        if fatal is not None and fatal.exit_code == EXIT_AUTHORIZATION:
            self._not_authorized(now, fatal.message, failures=health.failures + 1)
            return
        if fatal is not None:
            delay, state, reason = self.policy.backoff_max_s, "failed", fatal.message
            log.error(
                "the %s query failed and a restart cannot fix it: %s (trying again every %.0fs)",
                self.name,
                fatal.message,
                delay,
            )
        else:
            delay, state, reason = self.policy.delay(self.failures), "restarting", None
            log.error(
                "the %s query failed (%s); restarting it from its checkpoint in %.0fs (failure %d in a row)",
                self.name,
                description,
                delay,
                self.failures,
            )
        self._next_try = now + delay
        self.status.part(
            self.name, state=state, failures=health.failures + 1, failure=description, reason=reason
        )

    def _not_authorized(self, now: float, message: str, *, failures: int | None = None) -> None:
        """The principal may not read what the query needs: said once, tried again every
        ``backoff_max_s`` (an ACL granted later is picked up without a restart)."""
        self._next_try = now + self.policy.backoff_max_s
        if self._said != message:
            log.warning("the %s query cannot run: %s", self.name, message)
            self._said = message
        change: dict[str, object] = {"state": "not_authorized", "reason": self.policy.describe(message)}
        if failures is not None:
            change.update(failures=failures, failure=self.policy.describe(message))
        self.status.part(self.name, **change)

    def on_stop(self) -> None:
        """The query stopped once the thread has ended (none can start after this)."""
        q, self.query = self.query, None
        if q is not None:
            try:
                self.side.end(q)
            except Exception:  # stopping is best effort
                log.debug("stopping the %s query failed", self.name, exc_info=True)
        health = self.status.part_health(self.name)
        if health.state == "running":
            self.status.part(self.name, state="stopped")
