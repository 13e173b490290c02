"""The driver's side of the insights (issue 26) that needs the clock or the driver's memory: the
commit rate at the time of a request, and the group timeline (`Timeline`)."""

from __future__ import annotations

import time
from typing import Any

from state.rhythm import commit_rate


def with_commit_rate(snapshot: dict[str, Any], now_ms: int | None = None) -> dict[str, Any]:
    """The snapshot with ``commits_per_second`` at ``now_ms`` (from its ``commit_window``)."""
    window = snapshot.get("commit_window")
    if not isinstance(window, list):
        return snapshot
    now = int(time.time() * 1000) if now_ms is None else now_ms
    pairs = [(int(t), int(c)) for t, c in window]
    return {**snapshot, "commits_per_second": commit_rate(pairs, now)}
