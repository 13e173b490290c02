"""Commit rhythm (`state.rhythm`): the commit rate in the log's own time, the bounded window of
points, and which partitions trail the group's newest commit."""

from __future__ import annotations

import pytest

from lab.records import T0, Log, columns
from state import codec
from state.fold import fold_columns
from state.replay import fold
from state.rhythm import (
    BUCKET_MS,
    WINDOW_POINTS,
    commit_lags,
    commit_rate,
    note_commits,
    oldest_commit_ms,
    partitions_behind,
    points,
)
from state.snapshot import snapshot


def _committing(seconds: int, every_ms: int, partitions: int = 2) -> Log:
    log = Log()
    for i in range(seconds * 1000 // every_ms):
        for p in range(partitions):
            log.commit("g", "t", p, i)
        log.tick(every_ms)
    return log


def test_the_commit_rate_is_measured_in_log_time() -> None:
    log = _committing(60, 500)  # 2 partitions every 0.5 s: 4 commits/s for a minute
    g = fold(None, log.records).group
    assert g is not None and len(points(g.commit_window)) == WINDOW_POINTS
    window = points(g.commit_window)
    last_t = window[-1][0]
    rate = commit_rate(window, last_t)
    assert rate is not None and rate == pytest.approx(4.0, rel=0.1)
    # a consumer that stops committing: the rate decays with the mirror's clock, never sticks
    later = commit_rate(window, last_t + 60_000)
    assert later is not None and later == pytest.approx(rate * 55 / 115, rel=0.1)


@pytest.mark.parametrize(
    ("pairs", "now", "rate"),
    [
        ([], T0, None),
        ([(T0, 10)], T0 + 5_000, None),
        ([(T0, 10), (T0 + 10_000, 30)], T0 + 10_000, 2.0),
        ([(T0, 10), (T0 + 10_000, 30)], T0 + 20_000, 1.0),
        ([(T0, 10), (T0 + 10_000, 30)], T0, 2.0),  # a clock behind the log: the log's span
    ],
)
def test_commit_rate_table(pairs: list[tuple[int, int]], now: int, rate: float | None) -> None:
    assert commit_rate(pairs, now) == rate


def test_the_group_response_rate_is_a_function_of_the_log() -> None:
    """``commits_per_second`` of ``GET /groups/{id}`` is the rate as of the group's last commit:
    two mirrors (or one restarted) answer the same for the same log, whatever the clock says; only
    the exporter's gauge decays."""
    from streaming.serving.insights import with_commit_rate

    g = fold(None, _committing(60, 500).records).group
    assert g is not None
    snap = snapshot(g)
    window = points(g.commit_window)
    got = with_commit_rate(snap)
    assert got["commits_per_second"] == commit_rate(window, window[-1][0])
    assert got == with_commit_rate(snapshot(codec.decode(codec.encode(g))))  # restored from state
    assert with_commit_rate({**snap, "commit_window": [[T0, 3]]})["commits_per_second"] is None
    assert with_commit_rate({**snap, "commit_window": []})["commits_per_second"] is None
    assert "commits_per_second" not in with_commit_rate({"group_id": "g"})


def test_the_window_keeps_one_point_per_bucket_and_stays_monotonic() -> None:
    window = note_commits(b"", T0, 1)
    window = note_commits(window, T0 + 10, 2)  # same bucket: the point moves
    window = note_commits(window, T0 + BUCKET_MS, 3)
    window = note_commits(window, T0 + 1, 4)  # an older record time: ignored
    window = note_commits(window, T0 + BUCKET_MS + 5, 2)  # a counter going back: ignored
    assert points(window) == [(T0 + 10, 2), (T0 + BUCKET_MS, 3)]


def test_the_window_does_not_depend_on_how_the_log_is_cut_into_batches() -> None:
    """Per-record fold, the batch path in one call, and the batch path cut anywhere (with codec
    round trips in between) give the same window -- the fold's batch-invariance property."""
    log = _committing(40, 700, partitions=3)
    per_record = fold(None, log.records).group
    assert per_record is not None
    cols = columns(log.records)
    whole = fold_columns(None, cols, group_id="g").group
    assert whole is not None and whole.commit_window == per_record.commit_window
    n = len(log.records)
    for cut in (1, 7, n // 2, n - 1):
        first = fold_columns(None, {k: v[:cut] for k, v in cols.items()}, group_id="g").group
        assert first is not None
        first = codec.decode(codec.encode(first))
        rest = fold_columns(first, {k: v[cut:] for k, v in cols.items()}, group_id="g").group
        assert rest is not None and rest.commit_window == per_record.commit_window, cut


def test_collapsed_commits_count_as_the_commits_they_stand_for() -> None:
    log = Log()
    for i in range(3):
        log.commit("g", "t", 0, i)
        log.tick(BUCKET_MS)
    g = fold_columns(None, columns(log.records, n_commits=[10, 10, 10]), group_id="g").group
    assert g is not None and [c for _, c in points(g.commit_window)] == [10, 20, 30]


def test_partitions_behind_the_group_s_newest_commit() -> None:
    log = Log()
    log.commit("g", "t", 0, 1)
    log.commit("g", "t", 1, 1)
    log.tick(600_000)
    log.commit("g", "t", 0, 2)  # partition 1 stopped committing ten minutes ago
    log.commit("g", "u", 0, 2)
    g = fold(None, log.records).group
    assert g is not None
    assert commit_lags(g) == {("t", 0): 0, ("t", 1): 600_000, ("u", 0): 0}
    assert partitions_behind(g, 300_000) == 1
    assert partitions_behind(g, 600_000) == 0  # strictly more than the threshold
    assert partitions_behind(g, 300_000, exclude=[("t", 1)]) == 0
    assert oldest_commit_ms(g) == T0 and oldest_commit_ms(g, exclude=[("t", 1)]) == T0 + 600_000
