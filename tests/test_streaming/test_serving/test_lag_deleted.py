"""A deleted topic in the lag view, pure (no broker): flagged while a group commits to it, and --
after the broker's offset tombstones (the coordinator's ``onPartitionsDeleted``) -- for as long as
its members still subscribe to it; the ``/groups/{id}/lag`` 404 reasons."""

from __future__ import annotations

from lab.synthetic import settings, stable_classic
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.serving.burrow import Burrow, lag_route
from streaming.serving.lag_metrics import LagExporter

GID = "g-del"
KEPT, GONE = f"{GID}.t0", f"{GID}.t1"


def _line(topic: str) -> str:
    return f'coordinator_mirror_topic_deleted{{cluster_name="c",group="{GID}",topic="{topic}"}} 1'


def _round(at_ms: int, missing: frozenset[str]) -> LogOffsets:
    return LogOffsets(
        at_ms, {(KEPT, p): PartitionEnds(0, 2000, 2000) for p in range(2)}, missing_topics=missing
    )


def test_deleted_topic_flagged_from_commits_then_from_subscriptions() -> None:
    g = stable_classic(GID, 4, topics=2)  # offsets on t0 and t1 (partitions 0, 1), members subscribe to both
    assert {t for t, _ in g.offsets} == {KEPT, GONE}
    tracker = LagTracker()
    exporter = LagExporter(tracker, Burrow(tracker, "c"), settings(cluster_name="c"))
    tracker.apply_groups([(GID, g)])
    assert tracker.subscribed() == {KEPT, GONE}
    tracker.apply_round(_round(1000, frozenset()))
    assert _line(GONE) not in exporter.exposition().decode()

    # the topic is deleted: a round finds it missing while the group still has offsets on it
    tracker.apply_round(_round(2000, frozenset({GONE})))
    body = exporter.exposition().decode()
    assert _line(GONE) in body and _line(KEPT) not in body
    status, lag = lag_route(tracker, None, f"/groups/{GID}/lag", 2000) or (0, {})
    assert status == 200 and lag["deleted_topics"] == [GONE]
    assert {r["topic"] for r in lag["partitions"] if r["topic_deleted"]} == {GONE}

    # the broker tombstones those offsets: the members' subscriptions keep the flag
    g2 = g.copy()
    g2.offsets = {tp: e for tp, e in g.offsets.items() if tp[0] != GONE}
    tracker.apply_groups([(GID, g2)])
    tracker.apply_round(_round(3000, frozenset({GONE})))
    assert _line(GONE) in exporter.exposition().decode()
    _, lag = lag_route(tracker, None, f"/groups/{GID}/lag", 3000) or (0, {})
    assert lag["deleted_topics"] == [GONE] and not any(r["topic_deleted"] for r in lag["partitions"])

    # the members leave (no subscription any more): nothing flagged
    g3 = g2.copy()
    g3.members = {}
    tracker.apply_groups([(GID, g3)])
    assert tracker.subscribed() == set()
    tracker.apply_round(_round(4000, frozenset()))
    assert "coordinator_mirror_topic_deleted{" not in exporter.exposition().decode()


def test_lag_404_says_why() -> None:
    tracker = LagTracker()
    tracker.apply_groups([(GID, stable_classic(GID, 2))])

    def reason(gid: str, *, filtered: bool = False, mirrored: bool = False) -> tuple[int, str, str]:
        status, body = lag_route(
            tracker, None, f"/groups/{gid}/lag", 0, filtered=lambda _: filtered, mirrored=lambda _: mirrored
        ) or (0, {})
        assert set(body) == {"error", "group_id", "reason", "message"}, body
        assert body["message"]
        return status, body["error"], body["reason"]

    assert reason("nope") == (404, "group_not_found", "unknown")
    assert reason("nope", filtered=True) == (404, "group_not_found", "filtered")
    assert reason("nope", mirrored=True) == (404, "group_not_found", "pending")
    tracker.apply_groups([(GID, None)])
    assert reason(GID) == (404, "group_not_found", "deleted")
    tracker.apply_groups([(GID, stable_classic(GID, 2))])
    status, body = lag_route(tracker, None, f"/groups/{GID}/lag", 0) or (0, {})
    assert status == 200 and body["deleted_topics"] == []
