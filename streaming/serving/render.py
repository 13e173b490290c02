"""Driver-facing additions to a group snapshot that need cluster configuration, not the log.

KIP-848 groups: a member may name a server-side assignor (K=5 ``ServerAssignor``); when none does,
the coordinator uses the first of the broker's ``group.consumer.assignors`` (``uniform`` by
default), which no record carries.  Like the coordinator (ConsumerGroup's preferred server
assignor), the most common member choice wins, else the configured default -- and the snapshot
says which (``assignor_source``).  Classic groups: the assignor is the selected protocol.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from state import codec
from state.config import OffsetConfig
from state.expiry import all_deadlines
from state.model import CLASSIC, CONSUMER, SIMPLE, Group
from state.snapshot import snapshot


def assignor(group: Group, default_server_assignor: str) -> tuple[str | None, str | None]:
    """The group's assignor and where it comes from (``members``, ``broker_default``, ``log``)."""
    kind = group.display_kind
    if kind == CONSUMER:
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if votes:
            # most common; ties broken by name for a stable answer
            return sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0][0], "members"
        return default_server_assignor, "broker_default"
    if kind in (CLASSIC, SIMPLE):
        return group.protocol, "log"
    return None, None


def snapshot_renderer(
    config: OffsetConfig, default_server_assignor: str
) -> Callable[[bytes], dict[str, Any]]:
    """State bytes (`state.codec`) -> the group's full snapshot, as ``GET /groups/{id}`` serves it.
    Deterministic: expiry deadlines are absolute times, so rendering later gives what the executor
    would have rendered at the end of the micro-batch."""

    def render(blob: bytes) -> dict[str, Any]:
        group = codec.decode(blob)
        out = snapshot(group, config, all_deadlines(group, config))
        out["assignor"], out["assignor_source"] = assignor(group, default_server_assignor)
        return out

    return render


def resolve_topic_ids(snapshot: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A snapshot with topic ids the log never named replaced by the cluster's names (members'
    assignments, pending revocations, targets, offsets), for ``GET /groups/{id}``."""
    if not names:
        return snapshot

    def fix(a: Any) -> Any:
        if not isinstance(a, list):
            return a
        return [{**x, "topic": names.get(x.get("topic"), x.get("topic"))} for x in a]

    out = dict(snapshot)
    members = snapshot.get("members")
    if isinstance(members, list):
        out["members"] = [
            {**m, **{k: fix(m.get(k)) for k in ("assignment", "pending_revocation", "target_assignment")}}
            for m in members
        ]
    offsets = snapshot.get("offsets")
    if isinstance(offsets, list):
        out["offsets"] = [{**o, "topic": names.get(o["topic"], o["topic"])} for o in offsets]
    return out
