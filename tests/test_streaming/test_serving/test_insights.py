"""What a group's response carries beyond its fold's snapshot (`streaming.serving.insights`): the
commit rate as of the group's last commit -- a function of the records alone, so a restarted or
second mirror answers the same for the same log."""

from __future__ import annotations

from lab.records import T0, Log
from lab.synthetic import RENDERER, to_store_row
from state.replay import fold
from state.rhythm import commit_rate
from streaming.serving.insights import with_commit_rate


def test_the_rate_is_the_windows_as_of_its_newest_point() -> None:
    log = Log()
    for i in range(120):  # 2 partitions every 0.5 s for a minute: 4 commits/s
        for p in range(2):
            log.commit("g", "t", p, i)
        log.tick(500)
    g = fold(None, log.records).group
    assert g is not None
    snap = RENDERER(to_store_row(g)[1])
    out = with_commit_rate(snap)
    pairs = [(int(t), int(c)) for t, c in snap["commit_window"]]
    assert out["commits_per_second"] == commit_rate(pairs, pairs[-1][0])
    assert 3.5 <= out["commits_per_second"] <= 4.0
    assert {k: v for k, v in out.items() if k != "commits_per_second"} == snap  # nothing else changed
    assert "commits_per_second" not in snap


def test_no_window_no_rate() -> None:
    assert with_commit_rate({"group_id": "g"}) == {"group_id": "g"}  # no window at all
    assert with_commit_rate({"commit_window": None}) == {"commit_window": None}
    assert with_commit_rate({"commit_window": []})["commits_per_second"] is None
    one = with_commit_rate({"commit_window": [[T0, 3]]})
    assert one["commits_per_second"] is None  # one point: no span to measure over
