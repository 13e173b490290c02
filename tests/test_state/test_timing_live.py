"""Rebalance timings on the real broker, against what the clients observed.

`lab.scenarios_insights.rebalance_timing`: a classic and a KIP-848 group, each created by two
confluent-kafka members and then joined by a third; the members record when they were created and
when their rebalance callbacks ran.  The session broker's `__consumer_offsets` is captured and the
groups' records folded (the mirror's own fold): the timings must agree with the clients within
`TOLERANCE_MS` -- the broker's heartbeat interval here (500 ms): a KIP-848 member reports its
reconciliation at its next heartbeat, and a callback runs on the member's poll loop.  Figures seen
while writing this (a loaded 2-core machine): 3-100 ms apart.
"""

from __future__ import annotations

from typing import Any

import pytest

from decoders import decode_record
from decoders.records import Source
from state.events import RebalanceTimed
from state.replay import fold
from streaming.pipeline.capture_format import read_capture

pytestmark = pytest.mark.broker

TOLERANCE_MS = 500


@pytest.fixture(scope="module")
def timed(kafka: Any, lab: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from lab.scenarios import run_scenarios
    from lab.scenarios_insights import rebalance_timing  # noqa: F401 - registers the scenario
    from streaming.app.capture_cmd import capture

    facts = run_scenarios(lab, ["rebalance_timing"])["rebalance_timing"].facts["timings"]
    out = tmp_path_factory.mktemp("timing") / "offsets.jsonl"
    capture(kafka.bootstrap, str(out))
    records = [
        decode_record(r.key, r.value, Source(r.partition, r.offset, r.timestamp_ms))
        for r in read_capture(out)
    ]
    result = {}
    for group, f in facts.items():
        mine = [r for r in records if getattr(getattr(r, "key", None), "group_id", None) == group]
        mine.sort(key=lambda r: (r.source.partition, r.source.offset))
        res = fold(None, mine, group_id=group)
        result[f["protocol"]] = (f, [e for e in res.events if isinstance(e, RebalanceTimed)], res.group)
    return result


def test_a_new_classic_group_from_first_join_to_stable(timed: dict[str, Any]) -> None:
    facts, events, _ = timed["classic"]
    first = events[0]
    # the group's first generation: the whole rebalance, from the generation-0 record.  (Its
    # members may be one or both: when the second JoinGroup comes late, a second rebalance
    # follows -- timed, as every later one, by its sync phase alone.)
    assert first.started_ms is not None and first.assigned_ms is not None and first.duration_ms is not None
    created, assigned = min(facts["created_ms"]), min(facts["first_assigned_ms"])
    assert 0 <= first.started_ms - created <= TOLERANCE_MS
    assert abs(first.stable_ms - assigned) <= TOLERANCE_MS
    assert abs(first.duration_ms - (assigned - created)) <= TOLERANCE_MS
    assert first.members == first.joined_count in (1, 2) and first.left_count == 0
    assert all(e.started_ms is None and e.assigned_ms is not None for e in events[1:])


def test_a_classic_member_joining_a_stable_group_times_only_the_sync_phase(timed: dict[str, Any]) -> None:
    facts, events, group = timed["classic"]
    last = events[-1]
    assert last.members == 3 and last.joined_count == 1 and last.left_count == 0
    assert last.started_ms is None and last.duration_ms is None  # the join phase is never written
    assert last.assigned_ms is not None and facts["joined_ms"] <= last.assigned_ms <= last.stable_ms
    assert abs(last.stable_ms - max(facts["last_callback_ms"])) <= TOLERANCE_MS
    assert group.last_timing.stable_ms == last.stable_ms


def test_a_kip848_member_joining_a_stable_group(timed: dict[str, Any]) -> None:
    facts, events, group = timed["consumer"]
    last = events[-1]
    assert last.kind == "consumer" and last.members == 3 and last.joined_count == 1
    assert last.started_ms is not None and last.assigned_ms is not None and last.duration_ms is not None
    joined, settled = facts["joined_ms"], max(facts["last_callback_ms"])
    assert 0 <= last.started_ms - joined <= TOLERANCE_MS
    assert last.started_ms <= last.assigned_ms <= last.stable_ms
    assert abs(last.stable_ms - settled) <= TOLERANCE_MS
    assert abs(last.duration_ms - (settled - joined)) <= TOLERANCE_MS
    assert group.last_timing.generation == group.assignment_epoch
