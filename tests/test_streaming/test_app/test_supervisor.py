"""`streaming.app.supervisor` with fake queries and a fake clock: the restart backoff (doubling,
capped, reset once the query is caught up again), the failures no restart fixes, and waiting for
the topic."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.app.errors import EXIT_AUTHENTICATION, EXIT_CONFIG
from streaming.app.supervisor import QueryRun, QuerySupervisor, RestartPolicy, SideQuerySupervisor
from streaming.serving.status import BatchStats, MirrorStatus
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


def supervised(**overrides: Any) -> tuple[QuerySupervisor, QueryRun, list[FakeQuery], Clock, MirrorStatus]:
    s = settings(**overrides)
    store = MirrorStatus()
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
    assert store.query_restarts == 4 and run.query is started[-1] and store.failure is None


def test_the_backoff_starts_over_once_the_query_caught_up() -> None:
    sup, _run, started, clock, store = supervised()
    for _ in range(3):
        started[-1].fail()
        sup.step(clock.now)
        clock.now += 60
        sup.step(clock.now)
    assert sup.failures == 3
    store.batch_done(BatchStats(batch_id=7))
    store.mark_ready()
    sup.step(clock.now)  # running, a batch done, caught up
    assert sup.failures == 0
    started[-1].fail()
    sup.step(clock.now)
    assert sup.restart_at == clock.now + 5


def test_no_restart_while_the_cluster_does_not_answer() -> None:
    sup, _run, started, clock, store = supervised()
    started[-1].fail()
    store.source_checked("TimeoutException: no answer")
    sup.step(clock.now)
    clock.now += 600
    sup.step(clock.now)
    assert len(started) == 1
    store.source_checked(None)
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
    store = MirrorStatus()
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


# -- the side queries (the share-state query): the same policy, health in the status, never fatal --
class FakeSide:
    name = "share_state"

    def __init__(self) -> None:
        self.wait: str | Exception | None = None
        self.started: list[FakeQuery] = []
        self.ended: list[FakeQuery] = []
        self.begin_error: Exception | None = None

    def waiting(self) -> str | None:
        if isinstance(self.wait, Exception):
            raise self.wait
        return self.wait

    def begin(self) -> Any:
        if self.begin_error is not None:
            raise self.begin_error
        self.started.append(FakeQuery())
        self.started[-1].lastProgress = None  # type: ignore[attr-defined]
        return self.started[-1]

    def end(self, query: Any) -> None:
        self.ended.append(query)

    def describe(self) -> str:
        return "fake"


def side_supervised() -> tuple[SideQuerySupervisor, FakeSide, MirrorStatus, Clock]:
    side, status, clock = FakeSide(), MirrorStatus(), Clock()
    sup = SideQuerySupervisor(side, status, RestartPolicy(5, 60), wait_interval_s=10, clock=clock)
    return sup, side, status, clock


def test_a_side_query_waits_then_runs_and_its_health_says_so() -> None:
    sup, side, status, clock = side_supervised()
    side.wait = "waiting for __share_group_state"
    sup.step(clock.now)
    assert status.part_health("share_state").state == "waiting"
    assert status.part_health("share_state").reason == "waiting for __share_group_state"
    side.wait = None
    clock.now += 5
    sup.step(clock.now)  # asked again only after the wait interval
    assert side.started == []
    clock.now += 5
    sup.step(clock.now)
    health = status.part_health("share_state")
    assert len(side.started) == 1 and (health.state, health.restarts, health.reason) == ("running", 0, None)
    sup.on_stop()
    assert side.ended == side.started and status.part_health("share_state").state == "stopped"


def test_a_failing_side_query_is_restarted_with_the_policy_and_counted() -> None:
    sup, side, status, clock = side_supervised()
    sup.step(clock.now)
    waits = []
    for n in range(1, 4):
        side.started[-1].fail("org.apache.spark.SparkException: Python worker exited unexpectedly")
        failed_at = clock.now
        sup.step(clock.now)
        health = status.part_health("share_state")
        assert (health.state, health.failures) == ("restarting", n)
        assert health.failure is not None and "Python worker exited" in health.failure
        while len(side.started) == n:
            clock.now += 1
            sup.step(clock.now)
        waits.append(clock.now - failed_at)
    assert waits == [5, 10, 20]  # the main query's backoff
    health = status.part_health("share_state")
    assert (health.state, health.restarts, health.failures, health.failure) == ("running", 3, 3, None)
    side.started[-1].lastProgress = {"batchId": 4}  # type: ignore[attr-defined]
    sup.step(clock.now)  # it ran a batch: the backoff starts over
    assert sup.failures == 0


@pytest.mark.parametrize(
    ("text", "state"),
    [
        (
            "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access "
            "topics: [__share_group_state]",
            "not_authorized",
        ),
        ("org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed", "failed"),
    ],
)
def test_a_cause_no_restart_fixes_is_tried_again_only_at_the_longest_backoff(text: str, state: str) -> None:
    sup, side, status, clock = side_supervised()
    sup.step(clock.now)
    side.started[-1].fail(text)
    assert sup.step(clock.now)  # never fatal for the mirror
    health = status.part_health("share_state")
    assert (health.state, health.failures) == (state, 1) and health.reason
    clock.now += 59
    sup.step(clock.now)
    assert len(side.started) == 1
    clock.now += 1
    sup.step(clock.now)
    assert len(side.started) == 2 and status.part_health("share_state").state == "running"


def test_a_principal_that_may_not_describe_the_topic_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    sup, side, status, clock = side_supervised()
    side.wait = PermissionError("TopicAuthorizationException: not authorized")
    with caplog.at_level("WARNING", logger="coordinator_mirror"):
        for _ in range(3):
            sup.step(clock.now)
            clock.now += 60
    assert status.part_health("share_state").state == "not_authorized"
    assert sum("cannot run" in r.getMessage() for r in caplog.records) == 1
    assert side.started == []


def test_a_start_that_raises_is_a_failure_of_the_side_query() -> None:
    sup, side, status, clock = side_supervised()
    side.begin_error = RuntimeError("recovery failed: state store unreadable")
    sup.step(clock.now)
    health = status.part_health("share_state")
    assert (health.state, health.failures) == ("restarting", 1) and "state store" in (health.failure or "")
    side.begin_error = None
    clock.now += 5
    sup.step(clock.now)
    assert status.part_health("share_state").state == "running"


def test_the_source_is_checked_twice_per_interval() -> None:
    """`SourceCheck` waits at most half the interval for an answer; started every half interval,
    an outage shows within one."""
    sup, _run, _started, clock, _store = supervised(source_check_interval_s=10)
    checks: list[float] = []
    sup.check_source = lambda: checks.append(clock.now)
    for _ in range(81):  # 20 s in the supervisor loop's 0.25 s steps
        sup.step(clock.now)
        clock.now += 0.25
    assert [t - checks[0] for t in checks] == [0, 5, 10, 15, 20]


def test_no_reconciliation_round_while_the_source_is_down() -> None:
    """A round is ListGroups through the cluster client: with the cluster down it would block the
    supervisor's thread for the client's API timeout; it waits until the source check finds the
    cluster up again, then runs at once (its time passed meanwhile)."""
    sup, _run, _started, clock, status = supervised(reconcile_interval_s=60)
    rounds: list[float] = []
    sup.reconcile = lambda: rounds.append(clock.now) or True
    status.batch_done(BatchStats(batch_id=1))
    status.mark_ready()
    clock.now += 61
    sup.step(clock.now)
    assert rounds == [clock.now]
    status.source_checked("the Kafka cluster does not answer")
    clock.now += 61
    sup.step(clock.now)
    clock.now += 61
    sup.step(clock.now)
    assert len(rounds) == 1
    status.source_checked(None)
    sup.step(clock.now)
    assert len(rounds) == 2
