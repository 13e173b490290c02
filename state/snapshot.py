"""JSON views of a group: the full snapshot (``GET /groups/{id}``) and the summary (``GET /groups``).

Field names are stable (documented in state/README.md); values are JSON scalars, lists and
objects; topic ids are translated to names with what the log showed (`Group.topic_name`), falling
back to the id.  Offsets carry ``expires_at_ms`` under the given config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from state.abandoned import abandoned_partitions
from state.config import DEFAULT_CONFIG, OffsetConfig
from state.expiry import all_deadlines, next_deadline_ms
from state.model import (
    CONSUMER,
    MEMBER_STATE_NAMES,
    SHARE,
    STREAMS,
    Assignment,
    Group,
    Member,
    TopicPartition,
)
from state.rhythm import commit_lags, points
from state.timing import phases
from state.votes import protocol_votes

SNAPSHOT_VERSION: Final = 1


def _assignment_json(g: Group, a: Assignment, by_id: bool) -> list[dict[str, Any]]:
    out: dict[str, list[int]] = {}
    for t, ps in a:
        name = g.topic_name(t) if by_id else t
        out.setdefault(name, []).extend(ps)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(out.items())]


def _member_json(g: Group, m: Member) -> dict[str, Any]:
    by_id = g.kind in (CONSUMER, SHARE)
    out: dict[str, Any] = {
        "member_id": m.member_id,
        "instance_id": m.instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "rack_id": m.rack_id,
        "session_timeout_ms": m.session_timeout_ms,
        "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "subscribed_topics": None if m.subscribed_topics is None else list(m.subscribed_topics),
        "subscribed_regex": m.subscribed_regex,
        "server_assignor": m.server_assignor,
        "supported_protocols": None if m.protocols is None else list(m.protocols),
        # streams: active tasks as {"topic": subtopology id, "partitions": [...]}
        "assignment": _assignment_json(g, m.assignment, by_id),
        "member_epoch": m.member_epoch,
        "previous_member_epoch": m.previous_member_epoch,
        "member_state": None
        if m.member_state is None or g.kind is None
        else MEMBER_STATE_NAMES.get(g.kind, {}).get(m.member_state, str(m.member_state)),
        "pending_revocation": _assignment_json(g, m.pending_revocation, by_id),
        "target_assignment": None
        if m.member_id not in g.targets
        else _assignment_json(g, g.targets[m.member_id], by_id),
        "subscription_error": m.subscription_error,
        "assignment_error": m.assignment_error,
    }
    if m.extra:
        out["extra"] = m.extra
    return out


def epoch_of(g: Group) -> int | None:
    """Generation (classic) or group epoch (modern): the one number the summary shows."""
    return g.group_epoch if g.kind in (CONSUMER, SHARE, STREAMS) else g.generation


def summary(
    g: Group,
    config: OffsetConfig = DEFAULT_CONFIG,
    deadlines: Mapping[TopicPartition, int | None] | None = None,
) -> dict[str, Any]:
    """``GET /groups`` row: id, kind, state, generation or epoch, member count, offset count, last
    change, last rebalance.

    ``deadlines``: the group's `all_deadlines` if the caller has them (a 50-offset group spends
    most of its fold evaluating expiry conditions otherwise)."""
    return {
        "group_id": g.group_id,
        "exists": g.exists,
        "kind": g.display_kind,
        "type": g.group_type,
        "state": g.state,
        "epoch": epoch_of(g),
        "members": len(g.members),
        "offsets": len(g.offsets),
        "last_change_ms": g.last_change_ms,
        "last_rebalance_ms": g.last_rebalance_ms,
        "next_deadline_ms": next_deadline_ms(g, config, deadlines),
    }


def snapshot(
    g: Group,
    config: OffsetConfig = DEFAULT_CONFIG,
    deadlines: Mapping[TopicPartition, int | None] | None = None,
) -> dict[str, Any]:
    """Everything in the model, JSON-shaped (``GET /groups/{id}``); ``deadlines`` as in `summary`."""
    if deadlines is None:
        deadlines = all_deadlines(g, config)
    abandoned = abandoned_partitions(g)
    trails = commit_lags(g, abandoned)
    offsets = []
    for (topic, partition), e in sorted(g.offsets.items()):
        offsets.append(
            {
                "topic": topic,
                "partition": partition,
                "offset": e[0],
                "leader_epoch": e[1],
                "metadata": e[2] if e[2] is not None else "",
                "commit_timestamp_ms": e[3],
                "expire_timestamp_ms": e[4],
                "topic_id": e[5],
                "expires_at_ms": deadlines[(topic, partition)],
                "source_partition": e[6],
                "source_offset": e[7],
                # issue 26: a topic no member subscribes to any more (its lag is reported apart),
                # and how far this partition's last commit trails the group's newest
                "abandoned": (topic, partition) in abandoned,
                "commit_trails_ms": trails.get((topic, partition)),
            }
        )
    members = [
        _member_json(g, m)
        for _, m in sorted(g.members.items(), key=lambda kv: (kv[1].instance_id or "", kv[0]))
    ]
    return {
        "snapshot_version": SNAPSHOT_VERSION,
        "group_id": g.group_id,
        "exists": g.exists,
        "kind": g.display_kind,
        "type": g.group_type,
        "protocol_type": g.protocol_type
        if g.kind not in (CONSUMER, SHARE, STREAMS)
        else {CONSUMER: "consumer", SHARE: "share", STREAMS: "streams"}[g.kind],
        "state": g.state,
        "state_since_ms": g.state_since_ms,
        "created_ms": g.created_ms,
        "last_change_ms": g.last_change_ms,
        "last_rebalance_ms": g.last_rebalance_ms,
        "generation": g.generation,
        "protocol": g.protocol,
        "leader": g.leader,
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "topology_epoch": g.topology_epoch,
        "validated_topology_epoch": g.validated_topology_epoch,
        "metadata_hash": g.metadata_hash,
        "topology": g.topology,
        "regexes": {k: list(v) for k, v in sorted(g.regexes.items())},
        "share_topics": g.share_topics,
        "protocol_votes": protocol_votes(g.members.values()),
        "members": members,
        "offsets": offsets,
        "topic_names": dict(sorted(g.topic_names.items())),
        "counters": dict(g.counters),
        "pending_confirmations": [
            {"topic": t, "partition": p, "deadline_ms": d} for (t, p), d in sorted(g.pending.items())
        ],
        "errors": list(g.errors),
        "next_deadline_ms": next_deadline_ms(g, config, deadlines),
        "last_position": None if g.last_position is None else list(g.last_position),
        "rebalance_timing": timing_json(g),
        "abandoned_topics": _abandoned_json(abandoned, deadlines),
        "commit_window": [list(p) for p in points(g.commit_window)],
    }


def timing_json(g: Group) -> dict[str, Any] | None:
    """The last timed rebalance (`state.timing`) with its phases, and whether one is being timed."""
    t = g.last_timing
    tracker = g.timing
    in_progress = None if tracker is None else tracker.started_ms
    if t is None and in_progress is None:
        return None
    out: dict[str, Any] = {"in_progress_since_ms": in_progress, "last": None}
    if t is not None:
        out["last"] = {
            "generation": t.generation,
            "started_ms": t.started_ms,
            "assigned_ms": t.assigned_ms,
            "stable_ms": t.stable_ms,
            "duration_ms": None if t.started_ms is None else t.stable_ms - t.started_ms,
            "phases_ms": dict(phases(g.display_kind, t.started_ms, t.assigned_ms, t.stable_ms)),
        }
    return out


def _abandoned_json(
    abandoned: frozenset[TopicPartition], deadlines: Mapping[TopicPartition, int | None]
) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}
    for tp in sorted(abandoned):
        entry = out.setdefault(tp[0], {"partitions": [], "expires_at_ms": None})
        entry["partitions"].append(tp[1])
        d = deadlines.get(tp)
        if d is not None and (entry["expires_at_ms"] is None or d < entry["expires_at_ms"]):
            entry["expires_at_ms"] = d
    return out
