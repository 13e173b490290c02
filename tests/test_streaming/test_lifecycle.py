"""The one lifecycle of the mirror's parts (`streaming.lifecycle`): a `PartGroup` starts its parts in
order and stops them in reverse, a failing start stops what already started, a stop is idempotent
and goes on past a part whose stop fails; `Step` is a start call and a stop call; `Worker` is the
one thread shell -- its interval, paced or not, the first wait, errors logged the first time and
every 100th, a stop that wakes and joins the thread, and a stopped worker never started again.

The worker's pauses are read through a recording `sleep` and a fake clock (no timed assertion);
the real thread is used where the thread itself is the subject (join, wake, a stuck step)."""

from __future__ import annotations

import logging
import threading
import time
import types
from collections.abc import Callable

import pytest

from streaming import lifecycle
from streaming.lifecycle import Part, PartGroup, Step, Worker


class Recorded:
    """A part that writes what happens to it into a shared journal."""

    def __init__(
        self, name: str, journal: list[str], *, fail_start: bool = False, fail_stop: bool = False
    ) -> None:
        self.name = name
        self.journal = journal
        self.fail_start = fail_start
        self.fail_stop = fail_stop

    def start(self) -> None:
        self.journal.append(f"start {self.name}")
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")

    def stop(self) -> None:
        self.journal.append(f"stop {self.name}")
        if self.fail_stop:
            raise RuntimeError(f"{self.name} cannot stop")


# ------------------------------------------------------------------------------------------ groups
def test_a_group_starts_in_order_and_stops_in_reverse() -> None:
    journal: list[str] = []
    group = PartGroup("g", [Recorded(n, journal) for n in "abc"])
    group.start()
    assert group.running == ["a", "b", "c"]
    group.stop()
    assert journal == ["start a", "start b", "start c", "stop c", "stop b", "stop a"]
    assert group.running == []


def test_a_failing_start_stops_what_started_and_raises() -> None:
    journal: list[str] = []
    group = PartGroup(
        "g",
        [
            Recorded("a", journal),
            Recorded("b", journal),
            Recorded("c", journal, fail_start=True),
            Recorded("d", journal),
        ],
    )
    with pytest.raises(RuntimeError, match="c cannot start"):
        group.start()
    # d never started; c failed, so it is not stopped; b and a are, in reverse
    assert journal == ["start a", "start b", "start c", "stop b", "stop a"]
    assert group.running == []


def test_a_stop_is_idempotent() -> None:
    journal: list[str] = []
    group = PartGroup("g", [Recorded("a", journal)])
    group.start()
    group.stop()
    group.stop()
    assert journal == ["start a", "stop a"]


def test_a_group_stopped_is_not_started_again() -> None:
    """Also when the stop comes first: a mirror stopped while it was being made starts nothing."""
    journal: list[str] = []
    group = PartGroup("g", [Recorded("a", journal)])
    group.stop()
    group.start()
    assert journal == [] and group.running == []


def test_a_stop_during_a_start_on_another_thread_stops_the_part_starting_and_starts_no_more() -> None:
    journal: list[str] = []
    entered, release = threading.Event(), threading.Event()

    class Slow(Recorded):
        def start(self) -> None:
            super().start()
            entered.set()
            release.wait(10)

    group = PartGroup("g", [Recorded("a", journal), Slow("slow", journal), Recorded("c", journal)])
    starter = threading.Thread(target=group.start)
    starter.start()
    assert entered.wait(10)
    group.stop()  # from the main thread, while "slow" is starting
    release.set()
    starter.join(10)
    assert journal == ["start a", "start slow", "stop a", "stop slow"]
    assert group.running == []


def test_a_failing_stop_is_logged_and_the_others_still_stop(caplog: pytest.LogCaptureFixture) -> None:
    journal: list[str] = []
    group = PartGroup(
        "g", [Recorded("a", journal), Recorded("b", journal, fail_stop=True), Recorded("c", journal)]
    )
    group.start()
    with caplog.at_level(logging.ERROR, logger="coordinator_mirror"):
        group.stop()
    assert journal[3:] == ["stop c", "stop b", "stop a"]
    assert [r.getMessage() for r in caplog.records] == ["stopping b failed"]


def test_a_started_part_is_not_started_twice() -> None:
    journal: list[str] = []
    group = PartGroup("g", [Recorded("a", journal)])
    group.start()
    group.start()
    assert journal == ["start a"]


def test_a_group_is_a_part_inside_another_group() -> None:
    """A cluster's parts are one group inside the mirror's: started in place, stopped in place."""
    journal: list[str] = []
    cluster = PartGroup("cluster", [Recorded("client", journal), Recorded("query", journal)])
    mirror = PartGroup("mirror", [Recorded("jvm", journal), cluster, Recorded("heap", journal)])
    assert isinstance(cluster, Part) and list(cluster) == cluster.parts
    mirror.start()
    mirror.stop()
    assert journal == [
        "start jvm", "start client", "start query", "start heap",
        "stop heap", "stop query", "stop client", "stop jvm",
    ]  # fmt: skip


def test_a_late_part_added_before_start_runs_last() -> None:
    journal: list[str] = []
    group = PartGroup("g")
    added = group.add(Recorded("x", journal))
    assert added.name == "x"
    group.start()
    group.stop()
    assert journal == ["start x", "stop x"]


def test_stops_from_two_threads_stop_each_part_once() -> None:
    journal: list[str] = []
    group = PartGroup("g", [Recorded(str(i), journal) for i in range(50)])
    group.start()
    threads = [threading.Thread(target=group.stop) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stops = [e for e in journal if e.startswith("stop")]
    assert sorted(stops) == sorted(f"stop {i}" for i in range(50))


# ------------------------------------------------------------------------------------------- steps
def test_a_step_stops_only_what_it_started() -> None:
    calls: list[str] = []
    step = Step("outputs", lambda: calls.append("open"), lambda: calls.append("close"))
    step.stop()  # not started: nothing to close
    step.start()
    step.stop()
    step.stop()
    assert calls == ["open", "close"]
    assert isinstance(step, Part)


def test_a_step_whose_start_fails_is_not_stopped() -> None:
    calls: list[str] = []

    def fail() -> None:
        raise ValueError("no")

    step = Step("check", fail, lambda: calls.append("close"))
    with pytest.raises(ValueError):
        step.start()
    step.stop()
    assert calls == []
    Step("no stop", lambda: None).stop()  # a step with no stop call


# ----------------------------------------------------------------------------------------- workers
class Scripted(Worker):
    """A worker whose pauses are recorded instead of waited, on a fake clock its steps advance:
    ``script`` says per step how long it takes and whether it raises; the thread ends after
    ``steps`` pauses (a pause that reports "stopped")."""

    def __init__(
        self, clock: list[float], *, steps: int, cost_s: float = 0.0, fails: bool = False, **kw: object
    ) -> None:
        super().__init__("mirror-scripted", 10.0, **kw)  # type: ignore[arg-type]
        self.clock = clock
        self.steps = steps
        self.cost_s = cost_s
        self.fails = fails
        self.pauses: list[float] = []
        self.ran_at: list[float] = []

    def work(self) -> bool | None:
        self.ran_at.append(self.clock[0])
        self.clock[0] += self.cost_s
        if self.fails:
            raise RuntimeError("step failed")
        return None

    def sleep(self, seconds: float) -> bool:
        self.pauses.append(round(seconds, 6))
        self.clock[0] += max(0.0, seconds)
        return len(self.pauses) > self.steps


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(lifecycle, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    return now


def _run(worker: Worker) -> None:
    worker.start()
    worker.join(10)
    assert not worker.alive()


@pytest.mark.parametrize(
    ("paced", "first_wait", "pauses", "ran_at"),
    [
        # the interval after each step's end: a step of 3 s every 13 s
        (False, True, [10.0, 10.0, 10.0, 10.0], [1010.0, 1023.0, 1036.0]),
        # paced: a round every 10 s whatever a round takes
        (True, True, [10.0, 7.0, 7.0, 7.0], [1010.0, 1020.0, 1030.0]),
        # no first wait: the first step at once
        (False, False, [10.0, 10.0, 10.0], [1000.0, 1013.0, 1026.0]),
    ],
    ids=["interval", "paced", "no-first-wait"],
)
def test_the_pause_between_steps(
    clock: list[float], paced: bool, first_wait: bool, pauses: list[float], ran_at: list[float]
) -> None:
    w = Scripted(clock, steps=len(pauses) - 1, cost_s=3.0, paced=paced, first_wait=first_wait)
    _run(w)
    assert w.pauses == pauses
    assert w.ran_at == ran_at


def test_a_step_slower_than_the_interval_is_followed_at_once_when_paced(clock: list[float]) -> None:
    w = Scripted(clock, steps=2, cost_s=25.0, paced=True, first_wait=False)
    _run(w)
    assert w.pauses == [-15.0, -15.0, -15.0] and w.ran_at == [1000.0, 1025.0, 1050.0]


def test_work_returning_false_ends_the_thread(clock: list[float]) -> None:
    class Once(Scripted):
        def work(self) -> bool:
            super().work()
            return False

    w = Once(clock, steps=100, first_wait=False)
    _run(w)
    assert w.ran_at == [1000.0] and w.pauses == []


def test_errors_are_logged_the_first_time_then_every_100th(
    clock: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    w = Scripted(clock, steps=250, fails=True, first_wait=False)
    with caplog.at_level(logging.WARNING, logger="coordinator_mirror"):
        _run(w)
    assert w.errors == 251  # the thread went on after every one
    warned = [r for r in caplog.records if r.name == "coordinator_mirror"]
    assert [r.getMessage() for r in warned] == [
        "mirror-scripted: a step failed (1 time(s))",
        "mirror-scripted: a step failed (101 time(s))",
        "mirror-scripted: a step failed (201 time(s))",
    ]
    assert all(r.exc_info is not None and "step failed" in str(r.exc_info[1]) for r in warned)


def test_an_error_while_stopping_ends_the_thread_unlogged(caplog: pytest.LogCaptureFixture) -> None:
    """A step interrupted by the stop (its client closed under it) is no failure."""
    began = threading.Event()

    class Interrupted(Worker):
        def work(self) -> None:
            began.set()
            self.stop_event.wait(10)
            raise OSError("client closed")

    w = Interrupted("mirror-interrupted", 0.0, first_wait=False)
    with caplog.at_level(logging.WARNING, logger="coordinator_mirror"):
        w.start()
        assert began.wait(10)
        w.stop()
    assert not w.alive() and w.errors == 0 and not caplog.records


# --------------------------------------------------------------------------------- a worker's thread
class Counting(Worker):
    def __init__(self, interval_s: float, hooks: list[str], **kw: object) -> None:
        super().__init__("mirror-counting", interval_s, **kw)  # type: ignore[arg-type]
        self.hooks = hooks
        self.steps = 0
        self.stepped = threading.Event()

    def work(self) -> None:
        self.steps += 1
        self.stepped.set()

    def wake(self) -> None:
        self.hooks.append("wake")

    def on_stop(self) -> None:
        self.hooks.append("on_stop")


def test_a_worker_runs_on_its_named_thread_and_stop_wakes_and_joins_it() -> None:
    hooks: list[str] = []
    w = Counting(3600.0, hooks, first_wait=False)  # would sleep an hour between steps
    assert w.name == "counting" and not w.started
    w.start()
    assert w.stepped.wait(10)
    assert w.alive() and w._thread is not None and w._thread.name == "mirror-counting"
    w.stop()
    assert not w.alive() and w.stopping
    assert hooks == ["wake", "on_stop"]
    assert w.steps == 1


def test_a_stopped_worker_is_not_started_again_and_a_stop_before_start_still_says_so() -> None:
    hooks: list[str] = []
    w = Counting(0.01, hooks)
    w.stop()
    w.start()
    assert not w.started and not w.alive() and w.steps == 0
    assert hooks == ["wake", "on_stop"]
    w.stop()  # idempotent
    assert hooks == ["wake", "on_stop"] * 2


def test_a_worker_started_twice_has_one_thread() -> None:
    w = Counting(3600.0, [], first_wait=False)
    w.start()
    first = w._thread
    w.start()
    assert w._thread is first
    w.stop()


def test_a_step_that_ignores_the_stop_is_left_behind_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    class Stuck(Worker):
        join_timeout_s = 0.2

        def work(self) -> None:
            release.wait(30)

    w = Stuck("mirror-stuck", 0.0, first_wait=False)
    w.start()
    with caplog.at_level(logging.WARNING, logger="coordinator_mirror"):
        w.stop()
    assert w.alive()
    assert [r.getMessage() for r in caplog.records] == ["mirror-stuck did not stop within 0s"]
    release.set()
    w.join(10)
    assert not w.alive()


def test_a_worker_stopped_from_its_own_thread_does_not_join_itself() -> None:
    done = threading.Event()

    class SelfStopping(Worker):
        def work(self) -> None:
            self.stop()
            done.set()

    w = SelfStopping("mirror-self", 0.0, first_wait=False)
    w.start()
    assert done.wait(10)
    w.join(10)
    assert not w.alive()


def test_sleep_returns_at_once_once_stopped() -> None:
    w = Counting(0.0, [])
    assert w.sleep(0.0) is False
    w.stop()
    began = time.monotonic()
    assert w.sleep(3600.0) is True
    assert time.monotonic() - began < 60  # not the hour


def test_what_a_part_is() -> None:
    parts: list[Callable[[], object]] = [
        lambda: PartGroup("g"),
        lambda: Step("s", lambda: None),
        lambda: Counting(1.0, []),
    ]
    for make in parts:
        assert isinstance(make(), Part)
    assert not isinstance(object(), Part)
