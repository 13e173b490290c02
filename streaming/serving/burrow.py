"""Burrow-compatible consumer health, the serving side: status changes as change events
(`StatusWatcher`, Burrow's notifier), Burrow's v3 HTTP paths and JSON shapes, and the lag route
``GET /groups/{id}/lag``.  The window, the ring of sampled ends and the rules live below, in
`streaming.health` (Burrow's storage and evaluator).

Where the mirror differs from Burrow (docs/monitoring.md "Consumer health"):

* commits reach the window once per offsets round (the newest commit of each partition since the
  previous round, as the fold leaves it): Burrow with a min-distance of ``lag_interval_s`` (and
  of the trigger interval); a consumer committing less often than that is seen commit by commit;
* a group deleted in the log (tombstone, DeleteGroups, all offsets expired) and an offset deleted
  or expired leave the window at once -- Burrow keeps them until ``expire-group``;
* owners (``owner``, ``client_id``) come from the group's assignment in the log, for every kind of
  group (KIP-848 included), with topic ids resolved to names;
* the log ends are the LSO by default (``lag_isolation``; Burrow reads the high watermark), and
  only of the partitions some mirrored group uses;
* the window starts empty after a mirror restart (``complete`` < 1 until it fills), as Burrow's.
"""

from __future__ import annotations

import math
import socket
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

from streaming.health.evaluator import Evaluator
from streaming.health.lag import LagTracker, PartitionLag, TopicPartition
from streaming.health.retention import RetentionWatch
from streaming.health.rules import OK, REWIND, STALL, STATUS_NAMES, GroupStatus, PartitionStatus
from streaming.health.window import STRIDE, Commit, commits_of
from streaming.serving import lag_view
from streaming.serving.share import ShareStateStore


class StatusWatcher:
    """Status changes between evaluations, as change events (``group_status_changed``,
    ``offset_rewound``, ``partition_stalled``); the latest statuses for the metrics."""

    def __init__(
        self, max_events: int = 1000, key: Callable[[TopicPartition], TopicPartition] | None = None
    ) -> None:
        self.groups: dict[str, int] = {}
        #: group -> topic-partition -> status; ``key`` shares the topic-partition tuples (the lag
        #: tracker's `KeyTable`): one (group, topic, partition) tuple a partition was ~50 MB of
        #: the driver at 10k groups x 50 partitions
        self.partitions: dict[str, dict[TopicPartition, int]] = {}
        self._key = key or (lambda tp: tp)
        self.events: deque[dict[str, Any]] = deque(maxlen=max_events)

    def update(
        self, statuses: Iterable[GroupStatus], now_ms: int, removed: Iterable[str] | None = None
    ) -> list[dict[str, Any]]:
        """The statuses of the groups evaluated.  ``removed`` None: ``statuses`` are every group
        (the others are gone); else only those groups changed, and ``removed`` are gone."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        key = self._key
        for gs in statuses:
            seen.add(gs.group)
            before = self.groups.get(gs.group)
            if before is not None and before != gs.status:
                out.append(
                    _event(
                        "group_status_changed",
                        gs.group,
                        now_ms,
                        before=STATUS_NAMES[before],
                        after=STATUS_NAMES[gs.status],
                    )
                )
            self.groups[gs.group] = gs.status
            old = self.partitions.get(gs.group, {})
            new: dict[TopicPartition, int] = {}
            for p in gs.partitions:
                tp = key((p.topic, p.partition))
                new[tp] = p.status
                if p.status != old.get(tp) and p.status in (REWIND, STALL):
                    etype = "offset_rewound" if p.status == REWIND else "partition_stalled"
                    out.append(
                        _event(
                            etype,
                            gs.group,
                            now_ms,
                            topic=p.topic,
                            partition=p.partition,
                            offset=p.newest_offset,
                        )
                    )
            self.partitions[gs.group] = new
        gone = (
            [g for g in self.groups if g not in seen]
            if removed is None
            else [g for g in removed if g not in seen]
        )
        for gid in gone:
            self.groups.pop(gid, None)
            self.partitions.pop(gid, None)
        self.events.extend(out)
        return out


def _event(etype: str, group: str, now_ms: int, **fields: Any) -> dict[str, Any]:
    return {"type": etype, "group_id": group, "timestamp_ms": now_ms, **fields}


# ----------------------------------------------------------------------------- HTTP (v3)
def _offset_json(c: Commit | None) -> dict[str, Any] | None:
    """Burrow's ``ConsumerOffset``: offset, commit time, when the offset was stored, lag then."""
    return None if c is None else {"offset": c[0], "timestamp": c[1], "observedAt": c[3], "lag": c[2]}


def _partition_status_json(p: PartitionStatus) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "owner": p.owner,
        "client_id": p.client_id,
        "status": STATUS_NAMES[p.status],
        "start": _offset_json(commits_of(p.window[:STRIDE])[0]) if p.window else None,
        "end": _offset_json(commits_of(p.window[-STRIDE:])[0]) if p.window else None,
        "current_lag": p.current_lag,
        "complete": p.complete,
    }


def status_json(gs: GroupStatus, cluster: str, show_all: bool) -> dict[str, Any]:
    parts = gs.partitions if show_all else [p for p in gs.partitions if p.status > OK]
    return {
        "cluster": cluster,
        "group": gs.group,
        "status": STATUS_NAMES[gs.status],
        "complete": gs.complete,
        "partitions": [_partition_status_json(p) for p in parts],
        "partition_count": len(gs.partitions),
        "maxlag": None if gs.maxlag is None else _partition_status_json(gs.maxlag),
        "totallag": gs.total_lag,
    }


class Burrow(Evaluator):
    """The evaluator (`streaming.health.evaluator`) with Burrow's notifier (`StatusWatcher`) and
    HTTP paths, for the routes, the metrics and the offsets thread."""

    def __init__(
        self, tracker: LagTracker, cluster: str, intervals: int = 10, min_distance_s: float = 1.0
    ) -> None:
        super().__init__(tracker, cluster, intervals, min_distance_s)
        self.watcher = StatusWatcher(key=tracker.keys.key)
        self.host = socket.gethostname()

    def evaluate_all(
        self, now_ms: int, *, full: bool = False, pause: Callable[[float], object] | None = None
    ) -> list[dict[str, Any]]:
        """One evaluation after each offsets round (`Evaluator.evaluate_changed`): the change events."""
        statuses, removed = self.evaluate_changed(now_ms, full=full, pause=pause)
        return self.watcher.update(statuses, now_ms, removed)

    # -- routes ----------------------------------------------------------------------------
    def _reply(self, path: str, message: str, **body: Any) -> dict[str, Any]:
        return {"error": False, "message": message, **body, "request": {"url": path, "host": self.host}}

    def _not_found(self, path: str, message: str) -> tuple[int, dict[str, Any]]:
        return 404, {"error": True, "message": message, "request": {"url": path, "host": self.host}}

    def route(self, path: str, now_ms: int) -> tuple[int, dict[str, Any]] | None:
        """``GET`` of a Burrow v3 path -> (HTTP status, JSON body); None: not a Burrow path."""
        parts = [unquote(x) for x in path.strip("/").split("/")]
        if parts[:2] != ["v3", "kafka"]:
            return None
        if len(parts) == 2:
            return 200, self._reply(path, "cluster list returned", clusters=[self.cluster])
        if parts[2] != self.cluster:
            return self._not_found(path, "cluster not found")
        if len(parts) == 3:
            return 200, self._reply(
                path, "cluster module detail returned", module={"class-name": "coordinator-mirror"}
            )
        if parts[3] == "topic":
            return self._topic_route(path, parts[4:])
        if parts[3] != "consumer":
            return self._not_found(path, "not found")
        if len(parts) == 4:
            return 200, self._reply(path, "consumer list returned", consumers=self.history.groups())
        group = parts[4]
        if len(parts) == 5:
            topics = self.consumer_detail(group)
            if topics is None:
                return self._not_found(path, "cluster or consumer not found")
            return 200, self._reply(path, "consumer detail returned", topics=topics)
        if len(parts) == 6 and parts[5] in ("status", "lag"):
            gs = self.status(group, now_ms)
            if gs is None:
                return self._not_found(path, "cluster or consumer not found")
            body = status_json(gs, self.cluster, show_all=parts[5] == "lag")
            return 200, self._reply(path, "consumer status returned", status=body)
        return self._not_found(path, "not found")

    def _topic_route(self, path: str, rest: list[str]) -> tuple[int, dict[str, Any]]:
        """Burrow's topic paths: ``/topic`` (the topics whose log ends the mirror reads: those
        some mirrored group commits to or is assigned), ``/topic/{topic}`` (each partition's
        latest offset -- the high watermark, as Burrow reads it -- indexed by partition; null for a
        partition no group uses, whose end the mirror does not read) and
        ``/topic/{topic}/consumers`` (the groups with a committed offset or an assignment on it)."""
        r = self.tracker.round
        parts = r.partitions if r is not None else {}
        if not rest:
            topics = sorted({t for t, _ in parts})
            return 200, self._reply(path, "topic list returned", topics=topics)
        topic = rest[0]
        if len(rest) == 1:
            ends = {p: e.high_watermark for (t, p), e in parts.items() if t == topic}
            if not ends:
                return self._not_found(path, "cluster or topic not found")
            offsets = [ends.get(p) for p in range(max(ends) + 1)]
            return 200, self._reply(path, "topic offsets returned", offsets=offsets)
        if len(rest) == 2 and rest[1] == "consumers":
            return 200, self._reply(path, "consumers of topic returned", consumers=self.consumers_of(topic))
        return self._not_found(path, "not found")

    def consumers_of(self, topic: str) -> list[str]:
        """The groups (of Burrow's consumer list) with a committed offset on or an assignment of a
        partition of ``topic`` (named as the cluster names it)."""
        names = self.tracker.topic_names
        out = []
        for gid in self.history.groups():
            view = self.tracker.view(gid)
            if view is not None and any(names.get(t, t) == topic for t, _ in (*view.offsets, *view.owners)):
                out.append(gid)
        return out

    def consumer_detail(self, group_id: str) -> dict[str, list[dict[str, Any]]] | None:
        """Burrow's ``ConsumerTopics``: topic -> partitions indexed by partition id, each with its
        window of ``intervals`` offsets (null where not filled yet, oldest first)."""
        window = self.history.window(group_id)
        rows = self.tracker.group_lag(group_id)
        if window is None or rows is None:
            return None
        by_tp = {(r.topic, r.partition): r for r in rows}
        topics: dict[str, list[dict[str, Any]]] = {}
        for t in sorted({t for t, _ in window} | {t for t, _ in by_tp}):
            n = 1 + max(p for tt, p in (*window, *by_tp) if tt == t)
            out = []
            for p in range(n):
                commits = commits_of(window.get((t, p), []))
                row = by_tp.get((t, p))
                pad: list[dict[str, Any] | None] = [None] * (self.intervals - len(commits))
                lag = 0 if row is None or row.lag != row.lag else int(row.lag)
                out.append(
                    {
                        "offsets": pad + [_offset_json(c) for c in commits] if commits else [],
                        "owner": ""
                        if row is None or row.owner.member_host == "unknown"
                        else row.owner.member_host,
                        "client_id": ""
                        if row is None or row.owner.client_id == "unknown"
                        else row.owner.client_id,
                        "current-lag": lag,
                    }
                )
            topics[t] = out
        return topics


def lag_route(
    tracker: LagTracker,
    burrow: Burrow | None,
    path: str,
    now_ms: int,
    *,
    filtered: Callable[[str], bool] | None = None,
    mirrored: Callable[[str], bool] | None = None,
    retention: RetentionWatch | None = None,
    share: ShareStateStore | None = None,
) -> tuple[int, dict[str, Any]] | None:
    """The lag side of the HTTP API: Burrow's ``/v3/kafka/...`` paths, and
    ``GET /groups/{id}/lag`` -- per partition committed offset, end, lag in messages and seconds,
    owner, ``topic_deleted``; the group's ``deleted_topics`` and ``denied_topics`` (no Describe
    ACL: end and lag unknown) -- with the round's sample time
    (``sampled_at_ms``: how fresh the figures are).  None: not one of these paths.

    Issue 38 (`streaming.serving.lag_view`): per partition and for the group ``catch_up`` (time to
    catch up), ``log_start_offset``, ``retention_margin`` and ``records_lost`` (``retention``:
    the counts); a share group's rows are its share-partitions (``share``: start offset as the
    committed offset, Kafka's share lag).

    A group without lag is a 404 ``group_not_found`` whose ``reason`` says why (`not_found_reason`):
    ``filtered`` (``filtered(id)``: the group filter excludes it), ``deleted`` (deleted in the log
    while the mirror ran), ``pending`` (``mirrored(id)``: in the mirror, not applied to the lag
    tracker yet) or ``unknown``."""
    if burrow is not None and path.startswith("/v3/"):
        return burrow.route(path, now_ms)
    if path.startswith("/groups/") and path.endswith("/lag"):
        group_id = unquote(path[len("/groups/") : -len("/lag")])
        rows = tracker.group_lag(group_id)
        view = tracker.groups.get(group_id)
        if rows is None or view is None:
            reason, message = not_found_reason(tracker, group_id, filtered, mirrored)
            return 404, {
                "error": "group_not_found",
                "group_id": group_id,
                "reason": reason,
                "message": message,
            }
        r = tracker.round
        rows = lag_view.share_rows(tracker, view, share, group_id) or rows
        body: dict[str, Any] = {
            "group_id": group_id,
            "isolation": tracker.isolation,
            "sampled_at_ms": None if r is None else r.sampled_at_ms,
            "deleted_topics": tracker.deleted_topics(view, rows),
            "denied_topics": tracker.denied_topics(view),
            "partitions": lag_json(rows),
        }
        history = burrow.history if burrow is not None else None
        lag_view.extend_body(body, tracker, history, retention, group_id=group_id, rows=rows)
        return 200, body
    return None


def not_found_reason(
    tracker: LagTracker,
    group_id: str,
    filtered: Callable[[str], bool] | None,
    mirrored: Callable[[str], bool] | None,
) -> tuple[str, str]:
    """Why ``GET /groups/{id}/lag`` has no lag for a group: (reason, message)."""
    if filtered is not None and filtered(group_id):
        return "filtered", "the group filter (group_allow_regex / group_deny_regex) excludes this group"
    if group_id in tracker.deleted:
        return "deleted", "the group was deleted in the log (tombstone, DeleteGroups or expiry)"
    if mirrored is not None and mirrored(group_id):
        return "pending", "mirrored, not in the lag tracker yet: applied before the next lag round"
    return "unknown", "the mirror has no such group"


def lag_json(rows: list[PartitionLag]) -> list[dict[str, Any]]:
    def num(x: float) -> float | None:
        return None if math.isnan(x) else x

    return [
        {
            "topic": r.topic,
            "partition": r.partition,
            "committed_offset": r.committed,
            "commit_timestamp_ms": r.commit_ms,
            "end_offset": r.end,
            "lag": None if math.isnan(r.lag) else int(r.lag),
            "lag_seconds": num(r.lag_seconds),
            "member_host": r.owner.member_host,
            "consumer_id": r.owner.consumer_id,
            "client_id": r.owner.client_id,
            "topic_deleted": r.topic_deleted,
            "abandoned": r.abandoned,
        }
        for r in rows
    ]
