"""The insights (issue 26) a group's response carries beyond its fold's snapshot: the commit rate
(from the snapshot's ``commit_window``)."""

from __future__ import annotations

from typing import Any

from state.rhythm import commit_rate


def with_commit_rate(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot with ``commits_per_second`` as of its group's last commit (the window's newest
    point, in the log's time): a function of the records alone, so a restart, a replay or a second
    mirror answers the same for the same log.  The exporter's gauge is the one that decays with the
    clock (`coordinator_mirror_group_commits_per_second`)."""
    window = snapshot.get("commit_window")
    if not isinstance(window, list):
        return snapshot
    pairs = [(int(t), int(c)) for t, c in window]
    return {**snapshot, "commits_per_second": commit_rate(pairs, pairs[-1][0] if pairs else 0)}
