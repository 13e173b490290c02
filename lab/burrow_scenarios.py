"""Consumers that Burrow judges, played on a real broker: one group per scenario, committing on a
fixed tick while producers append at a steady rate -- what `bench/burrow_side_by_side.py` runs
beside a real Burrow and tests/test_live/test_parity_live.py runs against the mirror.

Every scenario states Burrow 1.9.5's verdict per partition at the end of the run (``expected``,
from its rules in ``core/internal/evaluator/caching.go``) and, for the transitions, the verdicts
the partition passes through on the way (``passes``).  The schedules are built so that the verdict
does not depend on when either side samples the log ends: a consumer's lag grows (or shrinks) by
more per tick than the producer appends in one sampling interval, commits are a tick apart (more
than ``min-distance`` and the mirror's round), and the end is checked after ``CHECK_TICK`` ticks,
when every window holds ``intervals`` commits made after the first end was sampled.

Group and topic ``<prefix>-<name>``; the commits are plain OffsetCommits of a simple group (no
member), as a consumer with ``enable.auto.commit=false`` and ``assign()`` makes them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: the last tick: every check is made after it
CHECK_TICK = 24
#: what a partition's commit schedule gets: (tick, partition, the log end read just before) ->
#: the offset to commit, or None (no commit this tick)
Schedule = Callable[[int, int, int], int | None]


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    schedule: Schedule
    expected: tuple[str, ...]  # Burrow's partition verdicts after CHECK_TICK, per partition
    rate: float = 0.0  # messages a second appended to each partition, steadily
    preload: int = 0  # messages per partition before tick 0
    bursts: Mapping[int, int] = field(default_factory=dict)  # tick -> messages per partition
    #: verdicts the partitions pass through, in this order, between ticks (from, to)
    passes: tuple[str, ...] = ()
    passes_between: tuple[int, int] = (0, CHECK_TICK)

    @property
    def partitions(self) -> int:
        return len(self.expected)

    @property
    def expected_group(self) -> str:
        worst = max(STATUS_ORDER.index(s) for s in self.expected)
        return "ERR" if worst > STATUS_ORDER.index("ERR") else STATUS_ORDER[worst]


STATUS_ORDER = ("NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND")

#: producers append 10 messages a second; a slow consumer moves 4 a tick
RATE = 10.0


def _keeps_up(k: int, p: int, end: int) -> int:
    return end


def _slow(k: int, p: int, end: int) -> int:
    return 4 * k


def _stops(k: int, p: int, end: int) -> int | None:
    return 4 * k if k <= 11 else None


def _stalled(k: int, p: int, end: int) -> int:
    return 5


def _rewinds(k: int, p: int, end: int) -> int:
    # advancing, then set back by 30 at tick 21 and creeping on, below where it was
    return 4 * k if k <= 20 else 4 * 20 - 30 + (k - 21)


def _idle(k: int, p: int, end: int) -> int:
    return end


def _quiet_stop(k: int, p: int, end: int) -> int | None:
    return end if k <= 5 else None


def _reset_back(k: int, p: int, end: int) -> int:
    return 100 if k <= 19 else 40


def _rewind_recovers(k: int, p: int, end: int) -> int:
    # slow, set back by 30 at tick 18, back past its old offset (68) at tick 21, slow again
    if k <= 17:
        return 4 * k
    return 4 * 17 - 30 + 10 * (k - 18)


def _mixed(k: int, p: int, end: int) -> int:
    return end if p == 0 else 5


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "keeps-up", "commits the log end every tick against a steady producer", _keeps_up, ("OK",), RATE
    ),
    Scenario("slow", "advances 4 a tick while 40 are appended", _slow, ("WARN",), RATE),
    Scenario("stopped", "slow, then no commit after tick 11", _stops, ("STOP",), RATE),
    Scenario("stalled", "commits the same offset every tick, with lag", _stalled, ("STALL",), RATE),
    Scenario("rewinds", "set back at tick 21, never back to where it was", _rewinds, ("REWIND",), RATE),
    Scenario("idle", "caught up on a topic nobody writes to", _idle, ("OK",), preload=100),
    Scenario(
        "quiet-stop",
        "caught up on a quiet topic, no commit after tick 5; 50 messages at tick 12",
        _quiet_stop,
        ("STOP",),
        preload=100,
        bursts={12: 50},
        passes=("OK", "STOP"),  # OK while the ring of ends still holds 100
        passes_between=(13, CHECK_TICK),
    ),
    Scenario(
        "reset-back",
        "caught up at 100 on a quiet topic, reset to 40 at tick 20",
        _reset_back,
        ("REWIND",),
        preload=100,
        passes=("OK", "REWIND"),
        passes_between=(16, CHECK_TICK),
    ),
    Scenario(
        "rewind-recovers",
        "slow, set back by 30 at tick 18, past its old offset from tick 21 on",
        _rewind_recovers,
        ("WARN",),
        RATE,
        passes=("WARN", "REWIND", "WARN"),
        passes_between=(14, CHECK_TICK),
    ),
    Scenario("mixed", "partition 0 keeps up, partition 1 stalls", _mixed, ("OK", "STALL"), RATE),
)


def by_name(names: Iterable[str] | None = None) -> list[Scenario]:
    wanted = set(names or ())
    return [s for s in SCENARIOS if not wanted or s.name in wanted]


def passes_through(seen: Sequence[str], steps: Sequence[str]) -> bool:
    """Does the sequence of verdicts ``seen`` hold ``steps`` in this order (each at least once,
    anything between)?"""
    i = 0
    for s in seen:
        if i < len(steps) and s == steps[i]:
            i += 1
    return i == len(steps)


class ScenarioRun:
    """Plays ``scenarios`` against ``bootstrap``: `setup` creates and preloads the topics, `run`
    produces and commits for ``CHECK_TICK + 1`` ticks of ``tick_s`` seconds, calling ``on_tick(k)``
    after each tick's commits."""

    def __init__(self, bootstrap: str, scenarios: Sequence[Scenario], prefix: str, tick_s: float) -> None:
        self.bootstrap = bootstrap
        self.scenarios = list(scenarios)
        self.prefix = prefix
        self.tick_s = tick_s
        self.committed: dict[tuple[str, int], list[tuple[int, int]]] = {}  # (group, p) -> (tick, offset)
        self._stop = threading.Event()

    def group(self, s: Scenario) -> str:
        return f"{self.prefix}-{s.name}"

    topic = group

    def setup(self) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics(
            [NewTopic(self.topic(s), s.partitions, 1) for s in self.scenarios], operation_timeout=30
        )
        for fut in futures.values():
            try:
                fut.result(timeout=60)
            except KafkaException as exc:
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise
        self._produce([(s, s.preload) for s in self.scenarios if s.preload])

    def warm_up(self, mirror: Any) -> None:
        """Commits of a group of its own through ``mirror`` (anything with ``wait_batches(n,
        timeout_s)``) before the scenarios: the first micro-batches after a start take seconds, and
        commits a tick apart that one batch applies reach the mirror's window as one (the newest)."""
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": f"{self.prefix}-warm-up", "log_level": 0}
        )
        try:
            for _ in range(5):
                c.commit(offsets=[TopicPartition(self.topic(self.scenarios[0]), 0, 0)], asynchronous=False)
                time.sleep(1.0)
        finally:
            c.close()
        mirror.wait_batches(3, 120)

    def _produce(self, counts: Iterable[tuple[Scenario, int]]) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "log_level": 0})
        for s, n in counts:
            for p in range(s.partitions):
                for i in range(n):
                    producer.produce(self.topic(s), value=b"b%d" % i, partition=p)
        if producer.flush(60) != 0:
            raise TimeoutError("could not produce")

    def _producer_loop(self) -> None:
        """Every scenario with a rate gets its messages appended in 0.1 s steps."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "log_level": 0})
        steady = [s for s in self.scenarios if s.rate]
        started = time.monotonic()
        sent: dict[str, int] = {s.name: 0 for s in steady}
        while not self._stop.wait(0.1):
            elapsed = time.monotonic() - started
            for s in steady:
                due = int(s.rate * elapsed)
                for i in range(sent[s.name], due):
                    for p in range(s.partitions):
                        producer.produce(self.topic(s), value=b"r%d" % i, partition=p)
                sent[s.name] = due
            producer.poll(0)
        producer.flush(30)

    def run(self, on_tick: Callable[[int], Any] | None = None) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumers = {
            s.name: Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": self.group(s),
                    "enable.auto.commit": False,
                    "log_level": 0,
                }
            )
            for s in self.scenarios
        }
        producer = threading.Thread(target=self._producer_loop, name="scenario-producer", daemon=True)
        producer.start()
        try:
            t0 = time.monotonic()
            for k in range(CHECK_TICK + 1):
                bursts = [(s, s.bursts[k]) for s in self.scenarios if k in s.bursts]
                if bursts:
                    self._produce(bursts)
                for s in self.scenarios:
                    c = consumers[s.name]
                    offsets = []
                    for p in range(s.partitions):
                        tp = TopicPartition(self.topic(s), p)
                        _, end = c.get_watermark_offsets(tp, timeout=10, cached=False)
                        o = s.schedule(k, p, end)
                        if o is not None:
                            offsets.append(TopicPartition(self.topic(s), p, o))
                            self.committed.setdefault((self.group(s), p), []).append((k, o))
                    if offsets:
                        c.commit(offsets=offsets, asynchronous=False)
                if on_tick is not None:
                    on_tick(k)
                time.sleep(max(0.0, t0 + (k + 1) * self.tick_s - time.monotonic()))
        finally:
            self._stop.set()
            producer.join(60)
            for c in consumers.values():
                c.close()
