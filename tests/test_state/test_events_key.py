"""`state.events.event_key`: an event's identity, unique over real scenario output.

The session broker's whole ``__consumer_offsets`` after every default scenario (classic eager and
cooperative groups, static members, leaving and crashing members, KIP-848, transactions, deletes,
share and streams groups) is folded per group -- whole, and in micro-batches of two records with
the expiry step at each batch's time, as the adapter runs it -- and no two events share a key.  The
key the docs gave before, ``(group_id, type, source_partition, source_offset)``, is shown not to be
unique over the same output (one group record yields an event per member).
tests/test_state/test_properties.py holds the key unique over arbitrary logs too."""

from __future__ import annotations

import collections
import json
from typing import Any

import pytest

from lab.mirror_process import read_log
from state.events import EVENT_KEY, event_key
from state.fold import step_detail
from state.replay import fold

pytestmark = [pytest.mark.broker]

OLD_KEY = ("group_id", "type", "source_partition", "source_offset")


def _batched(records: list[Any], size: int) -> list[dict[str, Any]]:
    from lab.records import columns

    group, out = None, []
    for lo in range(0, len(records), size):
        batch = records[lo : lo + size]
        res = step_detail(group, columns(batch), batch[-1].source.timestamp_ms)
        group = res.group
        out += [e.to_json() for e in res.events]
    return out


def _collisions(bodies: list[dict[str, Any]], key: Any) -> dict[Any, list[str]]:
    seen: dict[Any, list[str]] = collections.defaultdict(list)
    for body in bodies:
        seen[key(body)].append(json.dumps(body, sort_keys=True))
    return {k: v for k, v in seen.items() if len(v) > 1}


@pytest.fixture(scope="module")
def scenario_events(kafka: Any, scenarios: Any) -> dict[str, list[dict[str, Any]]]:
    log = read_log(kafka.bootstrap)
    whole, batched = [], []
    for gid, records in log.items():
        whole += [e.to_json() for e in fold(None, records, group_id=gid).events]
        batched += _batched(records, 2)
    return {"whole": whole, "batches of two": batched}


@pytest.mark.parametrize("how", ["whole", "batches of two"])
def test_the_event_key_is_unique_over_real_scenario_output(
    scenario_events: dict[str, list[dict[str, Any]]], how: str
) -> None:
    bodies = scenario_events[how]
    types = collections.Counter(b["type"] for b in bodies)
    # the output spans what the key must tell apart
    for t in ("member_joined", "member_left", "assignment_changed", "member_replaced", "offsets_committed"):
        assert types[t] > 0, types
    assert len(bodies) > 150, types  # 186 whole, 213 in batches of two (4.3.1)
    assert _collisions(bodies, event_key) == {}


def test_the_old_key_was_not_unique(scenario_events: dict[str, list[dict[str, Any]]]) -> None:
    def old(body: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(body.get(f) for f in OLD_KEY)

    collided = collections.Counter(k[1] for k in _collisions(scenario_events["whole"], old))
    assert collided["assignment_changed"] > 0, collided
    assert set(collided) <= {"assignment_changed", "member_joined", "member_left", "member_replaced"}
    assert set(OLD_KEY) < set(EVENT_KEY)
