"""Burrow's evaluation rules (core/internal/evaluator/caching.go) from tables, the lookup table of
kafka-lag-exporter, and the group filter -- pure, no broker."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from streaming.pipeline.prepare import GroupFilter, filter_packed
from streaming.serving import burrow as b
from streaming.serving.lag import LookupTable, lag_messages, lag_seconds

# (offset, timestamp ms, lag at commit)
C = b.Commit
NOW = 100_000


def commits(*rows: tuple[int, int, int | None]) -> list[int]:
    """A window as the rules read it (flat, lag None -> -1) from readable rows."""
    return b.window_of(rows)


# Burrow's own test vectors in spirit: each row one window, the rule's verdict
RULES = [
    # rule, window, expected
    (b.rule1_lag_ever_zero, commits((10, 1000, 5), (20, 2000, 0)), True),
    (b.rule1_lag_ever_zero, commits((10, 1000, 5), (20, 2000, None)), False),
    (b.rule2_rewind, commits((10, 1000, 5), (20, 2000, 5), (15, 3000, 5)), True),
    (b.rule2_rewind, commits((10, 1000, 5), (20, 2000, 5)), False),
    (b.rule4_stalled, commits((10, 1000, 5), (10, 2000, 6), (10, 3000, 7)), True),
    (b.rule4_stalled, commits((10, 1000, 5), (11, 2000, 6)), False),
    (b.rule5_lag_not_decreasing, commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 7)), True),
    (b.rule5_lag_not_decreasing, commits((10, 1000, 5), (20, 2000, 4)), False),
    (b.rule5_lag_not_decreasing, commits((10, 1000, 5), (20, 2000, None), (30, 3000, 6)), True),
]


def test_window_round_trip() -> None:
    rows = [(10, 1000, 5), (20, 2000, None), (15, 3000, 0)]
    assert b.window_of(rows) == [10, 1000, 5, 20, 2000, -1, 15, 3000, 0]
    assert b.commits_of(b.window_of(rows)) == rows


@pytest.mark.parametrize(("rule", "window", "expected"), RULES)
def test_rules(rule: object, window: list[int], expected: bool) -> None:
    assert rule(window) is expected  # type: ignore[operator]


@pytest.mark.parametrize(
    ("window", "now_ms", "stopped"),
    [
        (commits((10, 1000, 5), (20, 11_000, 5)), 20_000, False),  # 9 s idle < 10 s span
        (commits((10, 1000, 5), (20, 11_000, 5)), 22_000, True),  # 11 s idle > 10 s span
        (commits((10, 1000, 5)), 1001, True),  # one commit: span 0
    ],
)
def test_rule3_stopped(window: list[int], now_ms: int, stopped: bool) -> None:
    assert b.rule3_stopped(window, now_ms) is stopped


STATUS = [
    # window, current lag, recent ends, now, status
    (commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)), 0, [], 3500, b.OK),  # no lag: never an error
    (commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)), 5, [], 3500, b.WARN),  # rule 5
    (commits((10, 1000, 5), (20, 2000, 3), (30, 3000, 1)), 1, [], 3500, b.OK),  # lag decreasing
    (commits((10, 1000, 5), (20, 2000, 0), (30, 3000, 5)), 5, [], 3500, b.OK),  # rule 1
    (commits((30, 1000, 5), (20, 2000, 5), (25, 3000, 5)), 5, [], 3500, b.REWIND),  # rule 2
    (commits((10, 1000, 5), (10, 2000, 6), (10, 3000, 7)), 7, [], 3500, b.STALL),  # rule 4
    (commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)), 5, [], 9000, b.STOP),  # rule 3
    (commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)), 5, [25, 30], 9000, b.WARN),  # recently caught up
    (commits((30, 1000, 5), (20, 2000, 5)), 5, [], 9000, b.STOP),  # STOP is checked before REWIND
]


@pytest.mark.parametrize(("window", "lag", "recent", "now_ms", "status"), STATUS)
def test_partition_status(window: list[int], lag: int, recent: list[int], now_ms: int, status: int) -> None:
    assert b.partition_status(window, lag, recent, now_ms) == status


@pytest.mark.parametrize(
    ("parts", "group"),
    [
        ([b.OK, b.OK], b.OK),
        ([b.OK, b.WARN], b.WARN),
        ([b.WARN, b.STOP], b.ERR),
        ([b.REWIND], b.ERR),
        ([], b.OK),
    ],
)
def test_group_status_is_the_worst_capped_at_err(parts: list[int], group: int) -> None:
    assert b.group_status(parts) == group


def test_lookup_table_follows_kafka_lag_exporter() -> None:
    t = LookupTable(limit=4)
    for offset, ms in [(100, 1000), (200, 2000), (200, 3000), (200, 4000), (300, 5000)]:
        t.add(offset, ms)
    # the flat run 200@2000..200@4000 is one segment (its right end moved out)
    assert t.points.tolist() == [100, 1000, 200, 2000, 200, 4000, 300, 5000]
    t.add(250, 6000)  # not monotonic: ignored
    t.add(400, 5000)  # out of order: ignored
    assert len(t) == 4
    assert t.predict_ms(150) == 1500  # interpolated
    assert t.predict_ms(250) == 4500
    assert t.predict_ms(50) == pytest.approx(1000 - 50 * 4000 / 200)  # extrapolated along the window
    assert lag_seconds(300, t, 7000) == 0.0  # at the newest end
    assert lag_seconds(150, t, 7000) == pytest.approx(5.5)
    assert math.isnan(lag_seconds(150, LookupTable(), 7000))
    flat = LookupTable()
    for ms in (1000, 2000, 3000):  # an idle topic sampled since 1000, end 200, consumer at 150
        flat.add(200, ms)
    assert flat.points.tolist() == [200, 1000, 200, 3000]
    assert lag_seconds(150, flat, 4000) == 3.0  # at least since the first sample, never ~0
    t.add(500, 7000)  # the window slides
    assert t.points.tolist()[:2] == [200, 2000]
    assert lag_messages(10, 5) == 0 and lag_messages(5, 10) == 5


def test_group_filter_marks_filtered_groups_and_keeps_records_without_a_group() -> None:
    keep = GroupFilter(r"app-.*", r"app-test-.*")
    batch = pa.RecordBatch.from_pydict(
        {"group_id": ["app-1", "app-test-1", "other", None], "packed": [b"a", b"b", b"c", b"d"]}
    )
    out = filter_packed(batch, keep)
    assert out.column("packed").to_pylist() == [b"a", b"", b"", b"d"]
    assert not GroupFilter(None, None)
    assert filter_packed(batch, GroupFilter(None, "zzz")) is batch
