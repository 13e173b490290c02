"""Time to catch up (`streaming.health.catch_up`): the estimate from tables, the consume rate's decay
for a stopped consumer, the produce rate over the commits' window, the group as its slowest
partition."""

from __future__ import annotations

import math

import pytest

from streaming.health.catch_up import (
    CATCHING_UP,
    CAUGHT_UP,
    FALLING_BEHIND,
    UNKNOWN,
    CatchUp,
    consume_rate,
    estimate,
    group_estimate,
    offset_at,
    partition_estimate,
    produce_rate,
    window_rate,
)
from streaming.health.lag import LookupTable

S = 1000


@pytest.mark.parametrize(
    ("lag", "consume", "produce", "state", "seconds"),
    [
        (0, 10.0, 20.0, CAUGHT_UP, 0.0),  # no lag: caught up, whatever the rates
        (0, None, None, CAUGHT_UP, 0.0),
        (1000, 30.0, 10.0, CATCHING_UP, 50.0),
        (1000, 10.0, 10.0, FALLING_BEHIND, None),  # equal rates: the lag does not shrink
        (1000, 5.0, 10.0, FALLING_BEHIND, None),
        (1000, 0.0, 0.0, FALLING_BEHIND, None),  # stopped on an idle topic: never caught up
        (1000, None, 10.0, UNKNOWN, None),
        (1000, 30.0, None, UNKNOWN, None),
        (None, 30.0, 10.0, UNKNOWN, None),
        (math.nan, 30.0, 10.0, UNKNOWN, None),
    ],
)
def test_estimate_table(
    lag: float | None, consume: float | None, produce: float | None, state: str, seconds: float | None
) -> None:
    got = estimate(lag, consume, produce)
    assert (got.state, got.seconds) == (state, seconds)
    assert (got.consume_rate, got.produce_rate) == (consume, produce)
    assert set(got.to_json()) == {"state", "seconds", "consume_rate", "produce_rate"}


def test_consume_rate_of_a_live_consumer_and_its_decay_once_stopped() -> None:
    commits = [(k * 10 * S, 100 * k) for k in range(6)]  # 10 records/s, a commit every 10 s
    assert consume_rate(commits, 50 * S) == 10.0
    assert consume_rate(commits, 59 * S) == 10.0  # within one commit interval of the newest: live
    # then the span stretches to now: a stopped consumer decays towards 0
    assert consume_rate(commits, 110 * S) == pytest.approx(500 / 100)
    assert consume_rate(commits, 10_010 * S) == pytest.approx(500 / 10_000)
    assert consume_rate(commits[:1], 10 * S) is None  # one commit: no rate yet
    assert consume_rate(commits[:1], 61 * S) == 0.0  # ... until it is a minute old: stopped
    assert consume_rate([], 10 * S) is None
    assert window_rate(2, (5, 100), (5, 200), 10) is None  # no time between them
    assert consume_rate([(0, 500), (10 * S, 100)], 10 * S) == 0.0  # a rewind is no consumption


def test_produce_rate_over_the_window_from_the_lookup_table() -> None:
    table = LookupTable(60)
    for k in range(11):  # 0..100 s: 5 records/s for 50 s, then 20 records/s
        end = 5 * k * 10 if k <= 5 else 250 + 200 * (k - 5)
        table.add(end, k * 10 * S)
    points = table.points
    assert produce_rate(points, None) == pytest.approx(1250 / 100)
    assert produce_rate(points, 50 * S) == pytest.approx(20.0)  # the window of the commits only
    assert produce_rate(points, 75 * S) == pytest.approx(20.0)
    assert offset_at(points, 55 * S) == pytest.approx(350.0)
    assert offset_at(points, -5) == 0.0 and offset_at(points, 10**9) == 1250.0
    assert produce_rate(points[:2], None) is None


def test_the_decay_counts_from_when_the_mirror_saw_the_newest_commit() -> None:
    """A live consumer's newest commit reaches the mirror a micro-batch or more after the broker
    wrote it: that delay is no pause (the live test read a consumer keeping up as slower than its
    producer).  Once the mirror has seen no newer commit for more than an interval, it decays."""
    first, newest = (0, 0), (4 * S, 40)  # 10 records/s, a commit a second
    assert window_rate(5, first, newest, 7 * S) == pytest.approx(40 / 6)  # by commit time: 2 s "paused"
    assert window_rate(5, first, newest, 7 * S, seen_ms=6 * S) == 10.0  # seen a second ago: live
    assert window_rate(5, first, newest, 17 * S, seen_ms=6 * S) == pytest.approx(40 / 14)  # then decays
    assert window_rate(5, first, newest, 7 * S, seen_ms=S) == pytest.approx(40 / 6)  # never before its time


def _steady_table(rate: int, seconds: int) -> LookupTable:
    table = LookupTable(60)
    for k in range(seconds + 1):
        table.add(1000 + rate * k, k * S)
    return table


@pytest.mark.parametrize(
    ("lag", "lag_at_newest", "now", "state"),
    [
        # keeps up with a live producer: equal rates, a lag of what was written since its commit,
        # caught up at its commit -- caught up, not falling behind
        (15.0, 0, 21 * S, CAUGHT_UP),
        (15.0, 10, 21 * S, CAUGHT_UP),  # within a second of production at its commit
        (15.0, 11, 21 * S, FALLING_BEHIND),  # more than that: the lag is not shrinking
        (15.0, -1, 21 * S, FALLING_BEHIND),  # lag at commit unknown (no round before it)
        # stopped, caught up when it stopped: once its newest commit is older than the window's
        # span (Burrow's "stopped") the lag it leaves grows -- falling behind
        (120.0, 0, 32 * S, FALLING_BEHIND),
    ],
)
def test_a_consumer_caught_up_at_its_newest_commit_is_caught_up_while_it_commits(
    lag: float, lag_at_newest: int, now: int, state: str
) -> None:
    table = _steady_table(10, now // S)
    window = (6, (15 * S, 1150), (20 * S, 1200), lag_at_newest, 20 * S)  # 10 records/s, as produced
    got = partition_estimate(lag, window, table.points, now)
    assert got.state == state, got
    assert got.seconds == (0.0 if state == CAUGHT_UP else None)
    assert got.produce_rate == pytest.approx(10.0)


def test_a_consumer_catching_up_stays_catching_up() -> None:
    table = _steady_table(10, 40)
    window = (6, (35 * S, 1000), (40 * S, 1100), 250, 40 * S)  # 20 records/s, far behind at its commit
    got = partition_estimate(300.0, window, table.points, 40 * S)
    assert got == CatchUp(CATCHING_UP, pytest.approx(30.0), 20.0, pytest.approx(10.0))
    # 2 s later, the commit seen 1 s ago: the consumer read 2 s x 20 records/s past its commit
    table = _steady_table(10, 42)
    window = (6, (35 * S, 1000), (40 * S, 1100), 250, 41 * S)
    got = partition_estimate(320.0, window, table.points, 42 * S)
    assert got == CatchUp(CATCHING_UP, pytest.approx((320 - 40) / 10), 20.0, pytest.approx(10.0))
    # stopped (seen longer ago than the window's span): no read-ahead assumed, the rate decays
    got = partition_estimate(320.0, window, table.points, 46_500)
    assert got.state == CATCHING_UP and got.seconds == pytest.approx(320 / (100 / 9.5 - 10))


def test_an_idle_topic_produces_nothing() -> None:
    table = LookupTable(60)
    for k in range(5):
        table.add(700, k * 10 * S)  # a flat line: one segment, its end moved out
    assert len(table) == 2
    assert produce_rate(table.points, 10 * S) == 0.0


def test_partition_estimate_reads_window_and_table() -> None:
    table = LookupTable(60)
    for k in range(7):
        table.add(1000 + 10 * k * 10, k * 10 * S)  # 10 records/s
    window = (4, (30 * S, 400), (60 * S, 1000), 500, 60 * S)  # 20 records/s over 30 s
    got = partition_estimate(600.0, window, table.points, 60 * S)
    assert got == CatchUp(CATCHING_UP, 60.0, 20.0, 10.0)
    assert partition_estimate(600.0, None, table.points, 60 * S).state == UNKNOWN
    assert partition_estimate(0.0, None, (), 60 * S).state == CAUGHT_UP


def test_the_group_is_its_slowest_partition() -> None:
    a = CatchUp(CATCHING_UP, 30.0, 10.0, 5.0)
    b = CatchUp(CATCHING_UP, 90.0, 3.0, 1.0)
    done = CatchUp(CAUGHT_UP, 0.0, 1.0, 1.0)
    assert group_estimate([a, b, done]) == CatchUp(CATCHING_UP, 90.0, 14.0, 7.0)
    assert group_estimate([done, done]).state == CAUGHT_UP
    assert group_estimate([a, CatchUp(UNKNOWN, None, None, 2.0)]) == CatchUp(UNKNOWN, None, 10.0, 7.0)
    assert (
        group_estimate([a, CatchUp(FALLING_BEHIND, None, 1.0, 2.0), CatchUp(UNKNOWN)]).state == FALLING_BEHIND
    )
    assert group_estimate([]).state == UNKNOWN
