"""The fold's fidelity check against the coordinator: a capture's records by group, and one group's
folded state compared with what Kafka's AdminClient described."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

from decoders import Record, Source, decode_record
from state.model import CONSUMER, GROUP_TYPE_NAMES, SHARE, SIMPLE, STREAMS, Group
from state.replay import FoldResult
from streaming.pipeline.capture_format import read_capture

DEFAULT_CONSUMER_ASSIGNOR = "uniform"  # group.consumer.assignors default, first entry (Kafka 4.x)


def _records_by_group(capture_file: Path) -> dict[str, list[Any]]:
    by: dict[str, list[Any]] = collections.defaultdict(list)
    for c in read_capture(capture_file):
        r = decode_record(c.key, c.value, Source(c.partition, c.offset, c.timestamp_ms))
        assert isinstance(r, Record), r  # a 4.3 broker writes nothing this decoder does not know
        by[r.key.group_id].append(r)
    for recs in by.values():
        recs.sort(key=lambda r: (r.source.partition, r.source.offset))
    return by


def _assignment(g: Group, member_id: str) -> tuple[tuple[str, int], ...]:
    m = g.members[member_id]
    by_id = g.kind in (CONSUMER, SHARE)
    pairs = [(g.topic_name(t) if by_id else t, p) for t, ps in m.assignment for p in ps]
    return tuple(sorted(pairs))


def _target(g: Group, member_id: str) -> tuple[tuple[str, int], ...] | None:
    a = g.targets.get(member_id)
    if a is None:
        return None
    return tuple(sorted((g.topic_name(t), p) for t, ps in a for p in ps))


def _compare(name: str, view: Any, res: FoldResult) -> None:
    g = res.group
    if not view.exists:
        assert g is None or not g.exists, f"{name}: {view.group_id} deleted in the broker"
        return
    assert g is not None and g.exists, f"{name}: {view.group_id} missing from the mirror"
    where = f"{name}/{view.group_id}"
    assert g.kind is not None and GROUP_TYPE_NAMES[g.kind] == view.type, where
    assert g.state == view.state, where
    protocol_type = {CONSUMER: "consumer", SHARE: "share", STREAMS: "streams"}.get(
        g.kind, g.protocol_type or ""
    )
    assert protocol_type == (view.protocol_type or ""), where
    assert (g.display_kind == SIMPLE) == view.simple, where
    if g.kind == CONSUMER:
        assert (g.protocol or DEFAULT_CONSUMER_ASSIGNOR) == view.assignor, where
    elif g.kind in (SHARE, STREAMS):
        assert g.protocol is None, where
    else:
        assert g.protocol == view.assignor, where
    # members: ids, static ids, client ids and hosts, assignments, epochs
    mirror_members = {
        mid: (m.instance_id, m.client_id, m.client_host, _assignment(g, mid), m.member_epoch)
        for mid, m in g.members.items()
    }
    broker_members = {
        m.member_id: (m.group_instance_id, m.client_id, m.host, m.assignment, m.member_epoch)
        for m in view.members
    }
    assert mirror_members == broker_members, where
    for m in view.members:
        if m.target_assignment is not None:
            assert _target(g, m.member_id) == m.target_assignment, where
    if g.kind in (CONSUMER, SHARE, STREAMS):
        assert g.group_epoch == view.group_epoch, where
        assert g.assignment_epoch == view.target_assignment_epoch, where
    else:
        assert view.group_epoch is None, where
    # every topic id the members' assignments use was learned from the log
    if g.kind in (CONSUMER, SHARE):
        for m in g.members.values():
            for t, _ in (*m.assignment, *g.targets.get(m.member_id, ())):
                assert t in g.topic_names, f"{where}: topic id {t} never named by the log"
    # committed offsets
    mirror_offsets = {tp: (e[0], e[1], e[2] or "") for tp, e in g.offsets.items()}
    broker_offsets = {tp: (o.offset, o.leader_epoch, o.metadata) for tp, o in view.offsets.items()}
    assert mirror_offsets == broker_offsets, where
