"""Reading a fold's change events in the replay tests: their types in order, those of one class."""

from __future__ import annotations

from typing import Any

from state import events as ev


def types(events: list[ev.Event]) -> list[str]:
    return [e.TYPE for e in events]


def of(events: list[ev.Event], cls: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]
