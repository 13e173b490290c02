"""`streaming.app.supervisor` with fake queries and a fake clock: the restart backoff (doubling,
capped, reset once the query is caught up again), the failures no restart fixes, and waiting for
the topic."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.app.errors import EXIT_AUTHENTICATION, EXIT_CONFIG
from streaming.app.supervisor import QueryRun, QuerySupervisor, RestartPolicy
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings, load_settings


class FakeQuery:
    def __init__(self) -> None:
        self.isActive = True
        self.error: str | None = None

    def fail(self, error: str = "org.apache.spark.SparkException: executor lost") -> None:
        self.isActive, self.error = False, error

    def exception(self) -> Any:
        return None if self.error is None else RuntimeError(self.error)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "bootstrap_servers": "localhost:9092",
        "query_restart_backoff_s": 5,
        "query_restart_backoff_max_s": 60,
        "reconcile_interval_s": 0,
    }
    return load_settings(**{**base, **overrides})


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = RestartPolicy(5, 60)
    assert [policy.delay(n) for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]


@pytest.mark.parametrize(
    ("text", "fatal"),
    [
        ("org.apache.spark.SparkException: Job aborted: executor lost", None),
        (
            "org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed",
            EXIT_AUTHENTICATION,
        ),
    ],
)
def test_which_failures_a_restart_cannot_fix(text: str, fatal: int | None) -> None:
    cause = RestartPolicy(5, 60, "localhost:9092").fatal(text)
    assert (cause.exit_code if cause is not None else None) == fatal
    assert fatal != EXIT_CONFIG  # (a config failure is fatal too: `supervisor.FATAL`)


def supervised(**overrides: Any) -> tuple[QuerySupervisor, QueryRun, list[FakeQuery], Clock, SnapshotStore]:
    s = settings(**overrides)
    store = SnapshotStore()
    started: list[FakeQuery] = [FakeQuery()]
    run = QueryRun(query=started[0])  # type: ignore[arg-type]
    clock = Clock()

    def restart() -> Any:
        started.append(FakeQuery())
        return started[-1]

    sup = QuerySupervisor(
        s,
        store,
        run,
        RestartPolicy(s.query_restart_backoff_s, s.query_restart_backoff_max_s),
        begin=lambda: None,
        restart=restart,
        clock=clock,
    )
    return sup, run, started, clock, store


def test_a_failed_query_is_restarted_after_a_backoff_that_grows() -> None:
    sup, run, started, clock, store = supervised()
    waits = []
    for _ in range(4):
        started[-1].fail()
        failed_at = clock.now
        assert sup.step(clock.now)  # the failure is seen: a restart is scheduled
        assert store.failure is not None and "executor lost" in store.failure
        while len(started) == len(waits) + 1:
            clock.now += 1
            sup.step(clock.now)
        waits.append(clock.now - failed_at)
    assert waits == [5, 10, 20, 40]
    assert store.status.query_restarts == 4 and run.query is started[-1] and store.failure is None


def test_the_backoff_starts_over_once_the_query_caught_up() -> None:
    sup, _run, started, clock, store = supervised()
    for _ in range(3):
        started[-1].fail()
        sup.step(clock.now)
        clock.now += 60
        sup.step(clock.now)
    assert sup.failures == 3
    store.last_batch.batch_id = 7
    store.readiness.mark_ready()
    sup.step(clock.now)  # running, a batch done, caught up
    assert sup.failures == 0
    started[-1].fail()
    sup.step(clock.now)
    assert sup.restart_at == clock.now + 5


def test_no_restart_while_the_cluster_does_not_answer() -> None:
    sup, _run, started, clock, store = supervised()
    started[-1].fail()
    store.status.source_up = False
    sup.step(clock.now)
    clock.now += 600
    sup.step(clock.now)
    assert len(started) == 1
    store.status.source_up = True
    sup.step(clock.now)
    assert len(started) == 2


def test_a_failure_no_restart_fixes_ends_the_supervision() -> None:
    sup, run, started, clock, _store = supervised()
    started[-1].fail("org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed")
    assert not sup.step(clock.now)  # gave up
    assert run.fatal is not None and run.fatal.exit_code == EXIT_AUTHENTICATION
    assert len(started) == 1


def test_waiting_for_the_topic_asks_at_its_interval() -> None:
    s = settings(topic_wait_interval_s=10)
    store = SnapshotStore()
    run = QueryRun()
    asked: list[float] = []
    clock = Clock()
    appeared = FakeQuery()

    def begin() -> Any:
        asked.append(clock.now)
        return appeared if len(asked) == 3 else None

    sup = QuerySupervisor(s, store, run, RestartPolicy(5, 60), begin=begin, restart=FakeQuery, clock=clock)
    for _ in range(40):
        sup.step(clock.now)
        clock.now += 1
    assert asked == [1000, 1010, 1020] and run.query is appeared


def test_the_supervisor_runs_the_heap_while_the_query_runs() -> None:
    s = settings()
    store = SnapshotStore()

    run = QueryRun(query=None)
    steps: list[float] = []
    sup = QuerySupervisor(
        s,
        store,
        run,
        RestartPolicy(5, 60),
        begin=lambda: None,
        restart=FakeQuery,  # type: ignore[arg-type]
        housekeeping=[steps.append],
        clock=lambda: 0.0,
    )
    sup._next_topic_check = 1e9  # no query yet, and none begun: no chores
    sup.step(5.0)
    assert steps == []
    run.query = FakeQuery()  # type: ignore[assignment]
    sup.step(6.0)
    sup.step(7.0)
    assert steps == [6.0, 7.0]
