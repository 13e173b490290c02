"""Driver-facing additions to a group snapshot that need cluster configuration, not the log.

KIP-848 groups: a member may name a server-side assignor (K=5 ``ServerAssignor``); when none does,
the coordinator uses the first of the broker's ``group.consumer.assignors`` (``uniform`` by
default), which no record carries.  Like the coordinator (ConsumerGroup's preferred server
assignor), the most common member choice wins, else the configured default -- and the snapshot
says which (``assignor_source``).  Classic groups: the assignor is the selected protocol.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from state import codec
from state.config import OffsetConfig
from state.expiry import all_deadlines
from state.snapshot import snapshot


def with_assignor(snapshot: dict[str, Any], default_server_assignor: str) -> dict[str, Any]:
    kind = snapshot.get("kind")
    if kind == "consumer":
        votes = Counter(
            m.get("server_assignor") for m in snapshot.get("members", []) if m.get("server_assignor")
        )
        if votes:
            # most common; ties broken by name for a stable answer
            name = sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
            snapshot["assignor"], snapshot["assignor_source"] = name, "members"
        else:
            snapshot["assignor"], snapshot["assignor_source"] = default_server_assignor, "broker_default"
    elif kind in ("classic", "simple"):
        snapshot["assignor"], snapshot["assignor_source"] = snapshot.get("protocol"), "log"
    else:
        snapshot["assignor"], snapshot["assignor_source"] = None, None
    return snapshot


def snapshot_renderer(
    config: OffsetConfig, default_server_assignor: str
) -> Callable[[bytes], dict[str, Any]]:
    """State bytes (`state.codec`) -> the group's full snapshot, as ``GET /groups/{id}`` serves it.
    Deterministic: expiry deadlines are absolute times, so rendering later gives what the executor
    would have rendered at the end of the micro-batch."""

    def render(blob: bytes) -> dict[str, Any]:
        group = codec.decode(blob)
        return with_assignor(snapshot(group, config, all_deadlines(group, config)), default_server_assignor)

    return render
