"""Burrow's evaluation rules (`streaming.health.rules`; core/internal/evaluator/caching.go) from
tables: each rule alone, a partition's status per window, lag and ring of recent ends, the
group's status -- pure, no broker."""

from __future__ import annotations

import pytest

from streaming.health import rules as b

NOW = 100_000


def commits(*rows: tuple[int, int, int | None]) -> list[int]:
    """A window as the rules read it (flat, lag None -> -1) from readable rows."""
    return b.window_of(rows)


# Each rule alone, as Burrow 1.9.5 defines it (caching.go)
RULES = [
    # rule, window, expected
    (b.rule1_lag_ever_zero, commits((10, 1000, 5), (20, 2000, 0)), True),
    (b.rule1_lag_ever_zero, commits((10, 1000, 5), (20, 2000, None)), False),  # unknown is not zero
    (b.rule2_rewind_at, commits((10, 1000, 5), (20, 2000, 5), (15, 3000, 5)), 2),
    (b.rule2_rewind_at, commits((30, 1000, 5), (20, 2000, 5), (10, 3000, 5)), 1),  # the first one
    (b.rule2_rewind_at, commits((10, 1000, 5), (20, 2000, 5)), -1),
    (b.rule2_rewind_at, commits((10, 1000, 5), (10, 2000, 5)), -1),  # equal is not lower
    (b.rule4_stalled, commits((10, 1000, 5), (10, 2000, 6), (10, 3000, 7)), True),
    (b.rule4_stalled, commits((10, 1000, 5), (11, 2000, 6)), False),
    (b.rule5_lag_not_decreasing, commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 7)), True),
    (b.rule5_lag_not_decreasing, commits((10, 1000, 5), (20, 2000, 4)), False),
    (b.rule5_lag_not_decreasing, commits((10, 1000, 5), (20, 2000, None), (30, 3000, 6)), True),
    (b.rule5_lag_not_decreasing, commits((10, 1000, None), (20, 2000, None)), True),  # nothing known
]


def test_window_round_trip() -> None:
    rows = [(10, 1000, 5, 1100), (20, 2000, None, 2100), (15, 3000, 0, 3100)]
    assert b.window_of(rows) == [10, 1000, 5, 1100, 20, 2000, -1, 2100, 15, 3000, 0, 3100]
    assert b.commits_of(b.window_of(rows)) == rows
    assert b.commits_of(commits((10, 1000, 5))) == [(10, 1000, 5, 1000)]  # observed: the commit time


@pytest.mark.parametrize(("rule", "window", "expected"), RULES)
def test_rules(rule: object, window: list[int], expected: bool | int) -> None:
    assert rule(window) == expected  # type: ignore[operator]


@pytest.mark.parametrize(
    ("window", "rewind_at", "recovered"),
    [
        (commits((50, 1000, 5), (30, 2000, 25), (40, 3000, 15), (60, 4000, 5)), 1, True),  # past it
        (commits((50, 1000, 5), (30, 2000, 25), (50, 3000, 5)), 1, True),  # back at it
        (commits((50, 1000, 5), (30, 2000, 25), (49, 3000, 6)), 1, False),
    ],
)
def test_rule2_rewind_recovered(window: list[int], rewind_at: int, recovered: bool) -> None:
    assert b.rule2_rewind_at(window) == rewind_at
    assert b.rule2_recovered(window, rewind_at) is recovered


@pytest.mark.parametrize(
    ("window", "now_ms", "stopped"),
    [
        (commits((10, 1000, 5), (20, 11_000, 5)), 20_000, False),  # 9 s idle < 10 s span
        (commits((10, 1000, 5), (20, 11_000, 5)), 22_000, True),  # 11 s idle > 10 s span
        (commits((10, 1000, 5)), 2000, True),  # one commit: span 0
        # now in whole seconds, as Burrow reads the clock: 21.999 s is 21 s -> 10 s idle, not > 10 s
        (commits((10, 1000, 5), (20, 11_000, 5)), 21_999, False),
        (commits((10, 1000, 5), (20, 11_000, 5)), 22_000, True),
        (commits((10, 1500, 5)), 1999, False),  # 1.999 s -> 1 s: before the commit
    ],
)
def test_rule3_stopped(window: list[int], now_ms: int, stopped: bool) -> None:
    assert b.rule3_stopped(window, now_ms) is stopped
    flips = b.rule3_flips_at(window, 5, b.OK, 0)
    assert flips is not None and (now_ms > flips) is stopped  # the incremental evaluation's recheck time


# One row per status and per transition the issue names (Burrow 1.9.5's verdicts): window, current
# lag, the ring of recent sampled ends (Burrow's broker-offset ring), now, status
STATUS = [
    # -- statuses
    ("keeping up: lag zero now", commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)), 0, [], 3500, b.OK),
    ("slow: lag never decreases", commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)), 5, [], 3500, b.WARN),
    ("lag decreasing", commits((10, 1000, 5), (20, 2000, 3), (30, 3000, 1)), 1, [], 3500, b.OK),
    (
        "idle, caught up in the window",
        commits((10, 1000, 5), (20, 2000, 0), (30, 3000, 5)),
        5,
        [],
        3500,
        b.OK,
    ),
    (
        "rewinding, never recovering",
        commits((30, 1000, 5), (20, 2000, 5), (25, 3000, 5)),
        5,
        [],
        3500,
        b.REWIND,
    ),
    ("stalled", commits((10, 1000, 5), (10, 2000, 6), (10, 3000, 7)), 7, [], 3500, b.STALL),
    ("stopped", commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)), 5, [], 9000, b.STOP),
    (
        "stopped, caught up recently",
        commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)),
        5,
        [25, 30],
        9000,
        b.WARN,
    ),
    ("STOP is checked before REWIND", commits((30, 1000, 5), (20, 2000, 5)), 5, [], 9000, b.STOP),
    # -- the transitions Burrow 1.3.7+ decides differently from a Rule-1-first order
    # stopped on a quiet topic: caught up at 100 (end 100 for a long time), then a burst; once the
    # ring holds only ends after the burst, it is STOP ...
    (
        "quiet topic, stopped, burst in the ring only",
        commits((90, 1000, 10), (100, 2000, 0)),
        50,
        [150] * 10,
        60_000,
        b.STOP,
    ),
    # ... while the ring still holds an end at or below the newest commit, "caught up recently": OK
    (
        "quiet topic, burst just came",
        commits((90, 1000, 10), (100, 2000, 0)),
        50,
        [100] * 9 + [150],
        60_000,
        b.OK,
    ),
    # caught up, then reset backwards: REWIND, though the lag was zero in the window
    (
        "caught up, then reset backwards",
        commits((100, 1000, 0), (100, 2000, 0), (40, 3000, 60)),
        60,
        [100],
        3500,
        b.REWIND,
    ),
    # rewound and recovered past the old offset: the rewind is forgiven; lag never zero and not
    # decreasing: WARN
    (
        "rewound, recovered, slow",
        commits((50, 1000, 10), (30, 2000, 30), (60, 3000, 30)),
        30,
        [],
        3500,
        b.WARN,
    ),
    (
        "rewound, recovered, catching up",
        commits((50, 1000, 10), (30, 2000, 30), (60, 3000, 5)),
        5,
        [],
        3500,
        b.OK,
    ),
    (
        "rewound, back at the old offset",
        commits((50, 1000, 10), (30, 2000, 30), (50, 3000, 30)),
        30,
        [],
        3500,
        b.WARN,
    ),
    (
        "rewound, not yet back",
        commits((50, 1000, 10), (30, 2000, 30), (45, 3000, 30)),
        30,
        [],
        3500,
        b.REWIND,
    ),
    # keeping up against a steady producer: each commit's lag measured against the end read
    # *before* it (a few messages, sometimes 0) -- never the false WARN of ends read after it
    (
        "keeping up, steady producer",
        commits((100, 1000, 4), (110, 2000, 0), (120, 3000, 3)),
        2,
        [122],
        3500,
        b.OK,
    ),
    (
        "same, lags read after each commit",
        commits((100, 1000, 8), (110, 2000, 9), (120, 3000, 9)),
        2,
        [122],
        3500,
        b.WARN,
    ),
    # unknown lag (no end read before the commit) is skipped by Rules 1 and 5, as Burrow skips nil
    ("lags unknown, offsets moving", commits((10, 1000, None), (20, 2000, None)), 5, [], 2500, b.WARN),
]


@pytest.mark.parametrize(
    ("window", "lag", "recent", "now_ms", "status"),
    [row[1:] for row in STATUS],
    ids=[row[0] for row in STATUS],
)
def test_partition_status(window: list[int], lag: int, recent: list[int], now_ms: int, status: int) -> None:
    assert b.partition_status(window, lag, recent, now_ms) == status


def test_allowed_lag() -> None:
    """Burrow's ``allowed-lag`` (default 0): lag up to it counts as none."""
    w = commits((10, 1000, 3), (20, 2000, 3), (30, 3000, 3))
    assert b.partition_status(w, 3, [], 3500) == b.WARN
    assert b.partition_status(w, 3, [], 3500, allowed_lag=3) == b.OK
    assert b.partition_status(w, 4, [], 3500, allowed_lag=3) == b.OK  # Rule 1: lag 3 <= 3 in the window


@pytest.mark.parametrize(
    ("parts", "group"),
    [
        ([b.OK, b.OK], b.OK),
        ([b.OK, b.WARN], b.WARN),
        ([b.WARN, b.STOP], b.ERR),
        ([b.REWIND], b.ERR),
        ([b.STALL, b.OK], b.ERR),
        ([], b.OK),
    ],
)
def test_group_status_is_the_worst_capped_at_err(parts: list[int], group: int) -> None:
    assert b.group_status(parts) == group
