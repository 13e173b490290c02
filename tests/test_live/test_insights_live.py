"""The insights end to end (issue 26): real clients on the session broker, the mirror's Spark query,
its HTTP API and /metrics.

* rebalance timings of a classic and a KIP-848 group joined by a third member
  (`lab.scenarios_insights.rebalance_timing`) -- ``rebalance_timing`` in ``GET /groups/{id}`` agrees
  with the clients' callbacks within the broker's heartbeat interval, and the timeline lists the
  ``rebalance_timed`` event newest first;
* a classic group that left a topic and keeps committing (`Abandoner`): the abandoned offsets with
  their expiry, their lag apart from the group's (``/lag`` and ``/metrics``), a commit rate.
"""

from __future__ import annotations

import time
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.live_mirror import get, group_url, live_settings

pytestmark = [pytest.mark.broker, pytest.mark.spark]

TOLERANCE_MS = 500  # the broker's heartbeat interval (tests/test_state/test_timing_live.py)


@pytest.fixture(scope="module")
def world(
    module_mirrors: Any, kafka: Any, lab: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    from lab.scenarios import run_scenarios
    from lab.scenarios_insights import Abandoner, rebalance_timing  # noqa: F401 - registers it

    timing = run_scenarios(lab, ["rebalance_timing"])["rebalance_timing"]
    abandon = Abandoner(lab)
    work = tmp_path_factory.mktemp("insights")
    try:
        mirror = module_mirrors.start(
            live_settings(kafka.bootstrap, work, commit_behind_s=3600, cluster_name="insights"), ready_s=300
        )
        yield {"mirror": mirror, "timing": timing.facts["timings"], "abandon": abandon}
    finally:
        module_mirrors.close()  # the mirror stops before the abandoning client closes, as it did
        abandon.close()


def test_rebalance_timings_in_the_api_agree_with_the_clients(world: dict[str, Any]) -> None:
    mirror = world["mirror"]
    for group, facts in world["timing"].items():
        snap = get(group_url(mirror, group))
        last = snap["rebalance_timing"]["last"]
        settled = max(facts["last_callback_ms"])
        assert abs(last["stable_ms"] - settled) <= TOLERANCE_MS, (group, last, facts)
        if facts["protocol"] == "classic":
            assert last["started_ms"] is None and set(last["phases_ms"]) == {"CompletingRebalance"}
        else:
            assert set(last["phases_ms"]) == {"total", "Assigning", "Reconciling"}
            assert abs(last["duration_ms"] - (settled - facts["joined_ms"])) <= TOLERANCE_MS
        # the timeline: newest first, the timed rebalance among the group's latest events
        timeline = get(group_url(mirror, group, "/timeline"))
        events = timeline["events"]
        times = [e["source_timestamp_ms"] for e in events if e.get("source_timestamp_ms") is not None]
        assert times == sorted(times, reverse=True)
        timed = [e for e in events if e["type"] == "rebalance_timed"]
        assert timed and timed[0]["stable_ms"] == last["stable_ms"] and timed[0]["joined_count"] == 1
        assert {"member_joined", "rebalance_completed"} <= {e["type"] for e in events}
        assert "offsets_committed" not in {e["type"] for e in events}


def test_abandoned_offsets_and_the_commit_rhythm(world: dict[str, Any]) -> None:
    mirror, abandon = world["mirror"], world["abandon"]
    deadline = time.monotonic() + 90
    snap: dict[str, Any] = {}
    lag: dict[str, Any] = {}
    while time.monotonic() < deadline:
        snap = get(group_url(mirror, abandon.group))
        try:
            lag = get(group_url(mirror, abandon.group, "/lag"))
        except urllib.error.HTTPError:
            lag = {}
        if snap.get("commits_per_second") and lag.get("partitions"):
            break
        time.sleep(1)
    assert snap["abandoned_topics"].keys() == {abandon.left}
    left = snap["abandoned_topics"][abandon.left]
    committed = {(o["topic"], o["partition"]): o for o in snap["offsets"]}
    assert (
        left["partitions"] == [0] and left["expires_at_ms"] == committed[(abandon.left, 0)]["expires_at_ms"]
    )
    assert committed[(abandon.left, 0)]["abandoned"] and not committed[(abandon.kept, 0)]["abandoned"]
    assert snap["commits_per_second"] > 0
    rows = {(r["topic"], r["partition"]): r for r in lag["partitions"]}
    assert rows[(abandon.left, 0)]["abandoned"] and not rows[(abandon.kept, 0)]["abandoned"]
    # the abandoned partition's lag is exported once a lag round has read its log end (the lag
    # API lists the row before that, its lag unknown)
    mine: list[str] = []
    while True:
        text = get(f"{mirror.http.url}/metrics").decode()
        mine = [ln for ln in text.splitlines() if f'group="{abandon.group}"' in ln]
        wanted = "coordinator_mirror_group_abandoned_lag{"
        if any(ln.startswith(wanted) and abandon.left in ln for ln in mine):
            break
        assert time.monotonic() < deadline + 30, f"no {wanted} for {abandon.left}"
        time.sleep(1)
    assert not any(ln.startswith("kafka_consumergroup_group_lag{") and abandon.left in ln for ln in mine)
    assert any(ln.startswith("coordinator_mirror_group_abandoned_offsets{") for ln in mine)
    assert any(ln.startswith("coordinator_mirror_group_commits_per_second{") for ln in mine)
