"""Reading a fold's change events in the replay tests: their types in order, those of one class;
a group folded from offset commits only."""

from __future__ import annotations

from typing import Any

from lab.records import Log
from state import events as ev
from state.model import Group
from state.replay import fold


def types(events: list[ev.Event]) -> list[str]:
    return [e.TYPE for e in events]


def of(events: list[ev.Event], cls: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def committed_group(gid: str, offsets: dict[tuple[str, int], int]) -> Group:
    """An offsets-only group: one commit per (topic, partition) -> offset, folded."""
    log = Log()
    for (t, p), o in offsets.items():
        log.commit(gid, t, p, o)
    g = fold(None, log.records).group
    assert g is not None
    return g
