"""Time to catch up: from the consume and produce rates the lag tracker already samples, when a
partition's (and a group's) lag will be worked off -- or that it will not.

Inputs, all already held by the driver (nothing here reads Kafka or the clock):

* **produce rate** -- the partition's log end over time: kafka-lag-exporter's lookup table
  (`streaming.health.lag.LookupTable`, one point per offsets round, flat runs compressed), read
  from the window's start to its newest point;
* **consume rate** -- the group's committed offset over time: Burrow's window of commits
  (`streaming.health.window.CommitHistory`, the last ``burrow_intervals`` commits, at most one per
  offsets round), oldest to newest commit.  A consumer that stopped committing decays towards 0:
  the span is stretched to ``now`` once the mirror saw the newest commit more than one commit
  interval ago (`window_rate`), so a stopped consumer reads as stopped, not as running at its last
  rate.  Counted from when the mirror *saw* it, not from the commit's own time: a live consumer's
  newest commit reaches the mirror a micro-batch or more after the broker wrote it, and counting
  that delay as a pause read a consumer keeping up as slower than its producer (the live test).

The estimate (`estimate`), per partition, at the round's sample time:

* ``caught_up`` -- lag 0 (``seconds`` 0); or a consumer still committing (its newest commit seen
  within the window's span: Burrow's "stopped" rule) that was caught up at its newest commit --
  its lag then, against the log end read before it (Burrow's lag at commit), at most what the
  partition receives in `CAUGHT_UP_WITHIN_S`: a consumer that keeps up with a live producer
  trails it by what was written since its last commit, so its lag is rarely 0 and its rates are
  equal; without this rule it read as ``falling_behind`` (the live test,
  tests/test_live/test_catch_up_live.py);
* ``catching_up`` -- consumption faster than production: ``seconds = (lag - consume x age) /
  (consume - produce)``, ``age`` the newest commit's age at the sample time while the consumer
  commits (the committed offset trails the consumer by what it read since; 0 once it stopped);
* ``falling_behind`` -- consumption at or below production, so the lag is not shrinking (a
  stopped consumer on a live topic included; ``seconds`` null);
* ``unknown`` -- no lag figure, or fewer than two commits or two log-end samples in the window.

A group (`group_estimate`) is caught up when every partition is: ``falling_behind`` if one
partition is, else ``unknown`` if one is, else ``catching_up`` with the slowest partition's
seconds; its rates are the partitions' sums.  Abandoned partitions (a topic no member subscribes to)
and partitions of deleted topics are left out, as from the group's lag.

What it cannot know: the rates are averages over the window (``burrow_intervals`` rounds, ~100 s
at the defaults); a consumer that changes speed shows it only as the window moves, and a
producer's burst after the sample is not in it.  What the consumer read since its newest commit is
extrapolated at its window's rate.  How the estimate is checked and its error: docs/insights.md
("Time to catch up"), tests/test_live/test_catch_up_live.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from streaming.health.window import Span

CAUGHT_UP: Final = "caught_up"
CATCHING_UP: Final = "catching_up"
FALLING_BEHIND: Final = "falling_behind"
UNKNOWN: Final = "unknown"
#: a partition whose only commit in the window is older than this reads as a stopped consumer
#: (0 records/s) instead of an unknown rate
STOPPED_AFTER_MS: Final = 60_000
#: a consumer whose lag at its newest commit is at most this many seconds of production is caught
#: up: the records written while it fetched and committed (the log end it is compared with was
#: read before the commit, so a consumer at the head has a lag at commit of 0 or a few records)
CAUGHT_UP_WITHIN_S: Final = 1.0
#: the states, in the order a group takes the worst of (`group_estimate`)
STATES: Final = (CAUGHT_UP, CATCHING_UP, UNKNOWN, FALLING_BEHIND)


@dataclass(frozen=True)
class CatchUp:
    """One estimate: the JSON ``catch_up`` object of ``GET /groups/{id}/lag`` (shape fixed)."""

    state: str
    seconds: float | None = None
    #: records/s the group commits past on the partition (its consumption), None: unknown
    consume_rate: float | None = None
    #: records/s appended to the partition (its production), None: unknown
    produce_rate: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "seconds": self.seconds,
            "consume_rate": self.consume_rate,
            "produce_rate": self.produce_rate,
        }


def consume_rate(commits: Sequence[tuple[int, int]], now_ms: int) -> float | None:
    """Records/s from ``(timestamp_ms, offset)`` commits, oldest first (`window_rate` of the first
    and the newest)."""
    if not commits:
        return None
    return window_rate(len(commits), commits[0], commits[-1], now_ms)


def window_rate(
    n: int, first: tuple[int, int], last: tuple[int, int], now_ms: int, seen_ms: int | None = None
) -> float | None:
    """Records/s over a window of ``n`` commits from ``first`` to ``last`` (``(timestamp_ms,
    offset)``): the offset gained over the time between them -- or, once the newest commit was
    seen (``seen_ms``; default its own time) more than one commit interval before ``now_ms``,
    stretched by the excess (a consumer that stops committing decays to 0).  None with fewer than
    two commits or no time between them; never negative (a rewind reads as 0)."""
    if n < 2:
        # one commit: no rate yet -- unless it is old enough to call the consumer stopped
        return 0.0 if n == 1 and now_ms - last[0] > STOPPED_AFTER_MS else None
    (t0, o0), (t1, o1) = first, last
    span = t1 - t0
    if span <= 0:
        return None
    interval = span / (n - 1)
    seen = t1 if seen_ms is None else max(seen_ms, t1)
    elapsed = span + max(0.0, now_ms - seen - interval)
    return max(0.0, (o1 - o0) * 1000.0 / elapsed)


def offset_at(points: Sequence[int], at_ms: int) -> float | None:
    """The log end at ``at_ms`` from flat ``(offset, time_ms)`` points oldest first (the lookup
    table's layout), linear between the two points around it; the first point before the table
    starts; None without points."""
    n = len(points) // 2
    if n == 0:
        return None
    if at_ms <= points[1]:
        return float(points[0])
    for i in range(1, n):
        o1, t1 = points[2 * i], points[2 * i + 1]
        if at_ms <= t1:
            o0, t0 = points[2 * i - 2], points[2 * i - 1]
            return o0 + (o1 - o0) * (at_ms - t0) / (t1 - t0) if t1 > t0 else float(o1)
    return float(points[-2])


def produce_rate(points: Sequence[int], since_ms: int | None) -> float | None:
    """Records/s appended from ``since_ms`` (the oldest commit of the window; None: the table's
    start) to the newest sampled end, from flat ``(offset, time_ms)`` points.  None with fewer than
    two points or no time between the start and the newest point."""
    if len(points) < 4:
        return None
    t_end, o_end = points[-1], points[-2]
    start = points[1] if since_ms is None else max(since_ms, points[1])
    if t_end <= start:
        start = points[1]  # the window's commits are newer than the last sample: the whole table
        if t_end <= start:
            return None
    o_start = offset_at(points, start)
    assert o_start is not None
    return max(0.0, (o_end - o_start) * 1000.0 / (t_end - start))


def estimate(lag: float | None, consume: float | None, produce: float | None) -> CatchUp:
    """One partition's estimate from its lag (messages; None/NaN: unknown) and rates."""
    if lag is None or math.isnan(lag):
        return CatchUp(UNKNOWN, None, consume, produce)
    if lag <= 0:
        return CatchUp(CAUGHT_UP, 0.0, consume, produce)
    if consume is None or produce is None:
        return CatchUp(UNKNOWN, None, consume, produce)
    net = consume - produce
    if net <= 0:
        return CatchUp(FALLING_BEHIND, None, consume, produce)
    return CatchUp(CATCHING_UP, lag / net, consume, produce)


def group_estimate(parts: Iterable[CatchUp]) -> CatchUp:
    """The group's estimate from its partitions' (caught up when the slowest partition is)."""
    worst = CAUGHT_UP
    seconds = 0.0
    consume: float | None = None
    produce: float | None = None
    n = 0
    for p in parts:
        n += 1
        if STATES.index(p.state) > STATES.index(worst):
            worst = p.state
        if p.state == CATCHING_UP and p.seconds is not None:
            seconds = max(seconds, p.seconds)
        if p.consume_rate is not None:
            consume = (consume or 0.0) + p.consume_rate
        if p.produce_rate is not None:
            produce = (produce or 0.0) + p.produce_rate
    if n == 0:
        return CatchUp(UNKNOWN)
    if worst in (CAUGHT_UP, CATCHING_UP):
        return CatchUp(worst, seconds, consume, produce)
    return CatchUp(worst, None, consume, produce)


def partition_estimate(lag: float | None, window: Span | None, ends: Sequence[int], now_ms: int) -> CatchUp:
    """One partition's estimate from its lag, its window of commits -- ``(n, first, newest, lag at
    the newest, when the mirror saw the newest)``, each commit ``(timestamp_ms, offset)``
    (`CommitHistory.spans`), None: no commit -- and the flat ``(offset, time_ms)`` points of its
    log end, at ``now_ms`` (the round's sample time)."""
    if window is None:
        return estimate(lag, None, produce_rate(ends, None))
    n, first, newest, lag_at_newest, seen = window
    consume = window_rate(n, first, newest, now_ms, seen)
    produce = produce_rate(ends, first[0] if n >= 2 else None)
    got = estimate(lag, consume, produce)
    committing = n >= 2 and now_ms - max(seen, newest[0]) <= newest[0] - first[0]  # Burrow's "stopped"
    if not committing:
        return got
    if (
        got.state in (CATCHING_UP, FALLING_BEHIND)
        and 0 <= lag_at_newest <= (produce or 0.0) * CAUGHT_UP_WITHIN_S
    ):
        return CatchUp(CAUGHT_UP, 0.0, consume, produce)
    if got.state == CATCHING_UP and lag is not None and consume is not None and produce is not None:
        # the consumer read on since its newest commit: the committed lag overstates what is left
        # by consume x the commit's age (a commit interval and the mirror's delay; live: 4 s of
        # a 14 s estimate); what the consumer still has to read, at the net rate
        ahead = consume * max(0, now_ms - newest[0]) / 1000.0
        return CatchUp(CATCHING_UP, max(0.0, lag - ahead) / (consume - produce), consume, produce)
    return got
