"""Burrow-compatible consumer health, the serving side (`streaming.serving.burrow`), pure (no
broker): status changes as change events (`StatusWatcher`, Burrow's notifier); Burrow's v3 paths
and JSON shapes; the lag route -- a deleted topic flagged while a group commits to it and, after
the broker's offset tombstones (the coordinator's ``onPartitionsDeleted``), for as long as its
members still subscribe to it; the ``/groups/{id}/lag`` 404 reasons.  Over HTTP:
test_api_http_server.py."""

from __future__ import annotations

from typing import Any

from lab.synthetic import settings, stable_classic
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.health.rules import OK, REWIND, STALL, STOP, WARN, GroupStatus, PartitionStatus, window_of
from streaming.serving.burrow import Burrow, StatusWatcher, lag_route, status_json
from streaming.serving.lag_metrics import LagExporter
from tests.support.burrow import commit, end_round, tracked_burrow

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


# ------------------------------------------------------------------------------ the notifier
def _part(topic: str, status: int, newest: int = 10, lag: int = 0) -> PartitionStatus:
    return PartitionStatus(
        topic, 0, "/10.0.0.1", "client-1", status, window_of([(newest, 1000, lag)]), lag, 1.0
    )


def _group(gid: str, status: int, *parts: PartitionStatus) -> GroupStatus:
    return GroupStatus(gid, status, list(parts), 1.0, sum(p.current_lag for p in parts), None)


def test_the_watcher_says_what_changed_once() -> None:
    w = StatusWatcher(max_events=3)
    assert w.update([_group("g", OK, _part("t", OK))], 1000) == []  # first sight: no change to report
    events = w.update([_group("g", WARN, _part("t", STALL, newest=12))], 2000)
    assert events == [
        {
            "type": "group_status_changed",
            "group_id": "g",
            "timestamp_ms": 2000,
            "before": "OK",
            "after": "WARN",
        },
        {
            "type": "partition_stalled",
            "group_id": "g",
            "timestamp_ms": 2000,
            "topic": "t",
            "partition": 0,
            "offset": 12,
        },
    ]
    assert w.update([_group("g", WARN, _part("t", STALL, newest=12))], 3000) == []  # still stalled: said once
    rewound = w.update([_group("g", WARN, _part("t", REWIND, newest=5))], 4000)
    assert [e["type"] for e in rewound] == ["offset_rewound"] and rewound[0]["offset"] == 5
    assert len(w.events) == 3  # bounded: the oldest dropped
    assert w.groups == {"g": WARN} and w.partitions == {"g": {("t", 0): REWIND}}


def test_the_watcher_forgets_groups_gone_from_a_full_or_an_incremental_evaluation() -> None:
    w = StatusWatcher()
    w.update([_group("a", OK, _part("t", OK)), _group("b", STOP, _part("u", STOP))], 1000)
    w.update([_group("a", OK, _part("t", OK))], 2000, removed=[])  # incremental: b untouched
    assert set(w.groups) == {"a", "b"}
    w.update([], 3000, removed=["b"])
    assert set(w.groups) == {"a"} and "b" not in w.partitions
    w.update([], 4000)  # a full evaluation naming no group: every group is gone
    assert w.groups == {} and w.partitions == {}


def test_status_json_lists_only_the_partitions_that_are_not_ok_unless_asked() -> None:
    gs = GroupStatus("g/ü", WARN, [_part("t", OK, lag=0), _part("u", WARN, newest=7, lag=40)], 0.5, 40, None)
    body = status_json(gs, "c", show_all=False)
    assert (body["cluster"], body["group"], body["status"], body["totallag"]) == ("c", "g/ü", "WARN", 40)
    assert [p["topic"] for p in body["partitions"]] == ["u"] and body["partition_count"] == 2
    assert body["partitions"][0]["end"] == {"offset": 7, "timestamp": 1000, "observedAt": 1000, "lag": 40}
    assert [p["topic"] for p in status_json(gs, "c", show_all=True)["partitions"]] == ["t", "u"]


# ------------------------------------------------------------------------------ the v3 paths
def test_burrows_v3_paths() -> None:
    tracker, burrow = tracked_burrow(intervals=3)
    end_round(tracker, 1000, {("t", 0): 100})
    commit(tracker, burrow, 90, 1500, observed=1600)
    end_round(tracker, 2000, {("t", 0): 110})
    burrow.evaluate_all(2000)

    def get(path: str) -> tuple[int, dict[str, Any]]:
        answer = burrow.route(path, 2000)
        assert answer is not None, path
        assert answer[1]["request"]["url"] == path
        return answer

    assert get("/v3/kafka")[1]["clusters"] == ["c"]
    assert get("/v3/kafka/other")[0] == 404
    assert get("/v3/kafka/c")[1]["module"] == {"class-name": "coordinator-mirror"}
    assert get("/v3/kafka/c/consumer")[1]["consumers"] == ["g"]
    detail = get("/v3/kafka/c/consumer/g")[1]["topics"]["t"][0]
    assert detail["offsets"] == [
        None,
        None,
        {
            "offset": 90,
            "timestamp": 1500,
            "observedAt": 1600,
            "lag": 10,
        },
    ]
    status, body = get("/v3/kafka/c/consumer/g/lag")
    assert status == 200 and body["status"]["partition_count"] == 1
    assert get("/v3/kafka/c/consumer/nobody/status")[0] == 404
    assert get("/v3/kafka/c/topic")[1]["topics"] == ["t"]
    assert get("/v3/kafka/c/topic/t")[1]["offsets"] == [110]
    assert get("/v3/kafka/c/topic/t/consumers")[1]["consumers"] == ["g"]
    assert get("/v3/kafka/c/topic/none")[0] == 404
    assert get("/v3/kafka/c/nonsense")[0] == 404
    assert burrow.route("/groups/g", 2000) is None  # not Burrow's
