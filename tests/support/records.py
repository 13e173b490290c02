"""Raw `__consumer_offsets` bytes built by hand (keys and values of offset commits and classic
groups), independent of the encoder under test."""

from __future__ import annotations

import struct

T0 = 1_700_000_000_000


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def commit_key(group: str, topic: str, partition: int, k: int = 1) -> bytes:
    return struct.pack(">h", k) + _s(group) + _s(topic) + struct.pack(">i", partition)


def commit_value(offset: int, ts: int = 1_700_000_000_000) -> bytes:
    # OffsetCommitValue v3: offset, leaderEpoch, metadata, commitTimestamp
    return struct.pack(">hqi", 3, offset, -1) + _s("") + struct.pack(">q", ts)


def group_key(group: str) -> bytes:
    return struct.pack(">h", 2) + _s(group)


def classic_value(leader: str, members: list[str], generation: int = 1) -> bytes:
    """GroupMetadataValue v3: a classic "consumer" group with ``members`` (no subscription bytes)."""
    out = struct.pack(">h", 3) + _s("consumer") + struct.pack(">i", generation) + _s("range") + _s(leader)
    out += struct.pack(">q", T0) + struct.pack(">i", len(members))
    for m in members:
        out += _s(m) + struct.pack(">h", -1) + _s("client") + _s("/127.0.0.1")
        # rebalance and session timeouts, empty subscription and assignment bytes
        out += struct.pack(">iiii", 30000, 10000, 0, 0)
    return out
