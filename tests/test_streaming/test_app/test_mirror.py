"""The mirror as users run it (`streaming.app.mirror.Mirror`): its parts in order (fast, nothing
started); then a real broker, real Spark query, HTTP API -- agreement with the coordinator.

One Mirror runs against the session broker after every scenario ran (module fixture); its
``GET /groups/{id}`` must agree with what Kafka's AdminClient reported for every scenario group.
Then it is stopped and started again on the same checkpoint: it resumes (no re-read from offset 0)
and ends in the same state.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.http import get

EVENTS_TOPIC = "cm-test-events"
OFFSETS_TOPIC = "cm-test-offsets"


def group_url(mirror: Any, group_id: str) -> str:
    return f"{mirror.http.url}/groups/{urllib.parse.quote(group_id, safe='')}"


def mirror_settings(kafka: Any, tmp: Path, **extra: Any) -> Any:
    from streaming.settings import load_settings

    return load_settings(
        bootstrap_servers=kafka.bootstrap,
        checkpoint_location=str(tmp / "checkpoint"),
        trigger_interval_s=1.0,
        shuffle_partitions=2,
        http_port=0,
        events_path=tmp / "events",
        events_topic=EVENTS_TOPIC,
        offsets_topic=OFFSETS_TOPIC,
        cluster_name="test",
        **extra,
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mirror")


@pytest.fixture(scope="module")
def mirror(module_mirrors: Any, kafka: Any, scenarios: dict[str, Any], workdir: Path) -> Any:
    m = module_mirrors.start(mirror_settings(kafka, workdir), ready_s=300)
    m.wait_batches(1, 120)  # one batch after the catch-up: every snapshot applied
    return m


# ------------------------------------------------------------------------------------ agreement
def _assignment(snapshot_assignment: list[dict[str, Any]]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((a["topic"], p) for a in snapshot_assignment for p in a["partitions"]))


def assert_agrees(view: Any, snap: dict[str, Any]) -> None:
    """The mirror's snapshot of one group against Kafka's AdminClient view of it."""
    assert snap["type"] == view.type
    assert snap["state"] == view.state
    assert snap["protocol_type"] == (view.protocol_type or None) or (
        snap["protocol_type"] in (None, "") and view.protocol_type in (None, "")
    )
    if view.type == "Classic":
        assert snap["protocol"] == view.assignor
    else:
        assert snap["group_epoch"] == view.group_epoch
        assert snap["assignment_epoch"] == view.target_assignment_epoch
        if view.type == "Consumer":
            assert snap["assignor"] == view.assignor
    mirror_members = {m["member_id"]: m for m in snap["members"]}
    assert set(mirror_members) == {m.member_id for m in view.members}
    for m in view.members:
        mine = mirror_members[m.member_id]
        assert mine["instance_id"] == m.group_instance_id
        assert mine["client_id"] == m.client_id
        assert mine["client_host"] == m.host
        assert _assignment(mine["assignment"]) == m.assignment
        if m.member_epoch is not None:
            assert mine["member_epoch"] == m.member_epoch
    offsets = {
        (o["topic"], o["partition"]): (o["offset"], o["leader_epoch"], o["metadata"]) for o in snap["offsets"]
    }
    assert offsets == {tp: (o.offset, o.leader_epoch, o.metadata) for tp, o in view.offsets.items()}


def _check_agreement(mirror: Any, views: dict[str, Any], names: dict[str, str]) -> int:
    checked = 0
    for group_id, view in views.items():
        status, body = get(group_url(mirror, group_id))
        if not view.exists or (view.type == "Classic" and not view.offsets and not view.members):
            # deleted groups, and the aborted-transaction group: the coordinator keeps an
            # in-memory group for it that no record describes
            assert status == 404, (names[group_id], body)
            assert body["error"] == "group_not_found"
            continue
        assert status == 200, (names[group_id], body)
        try:
            assert_agrees(view, body)
        except AssertionError as exc:
            raise AssertionError(f"{names[group_id]} ({group_id}): {exc}") from exc
        checked += 1
    return checked


@pytest.mark.broker
@pytest.mark.spark
def test_every_scenario_group_agrees_with_the_admin_client(
    mirror: Any, scenarios: dict[str, Any], lab: Any
) -> None:
    """Compared with what the coordinator holds *now*: live groups can legitimately change after
    their scenario (a member starved of CPU misses its session and rejoins), and the mirror must
    follow them.  The coordinator is read first, then the mirror after two more micro-batches (it
    has then read every record written before the read); a group changing in between is retried."""
    names = {gid: result.name for result in scenarios.values() for gid in result.groups}
    error: AssertionError | None = None
    for _attempt in range(4):
        views = lab.describe(*names)
        mirror.wait_batches(2, 120)
        try:
            checked = _check_agreement(mirror, views, names)
        except AssertionError as exc:
            error = exc
            continue
        assert checked >= len(scenarios) - 2
        # and what the coordinator held right after each scenario is what it still holds
        changed = [n for gid, n in names.items() if scenarios[n].groups[gid] != views[gid]]
        assert len(changed) <= 2, changed
        return
    assert error is not None
    raise error


@pytest.mark.broker
@pytest.mark.spark
def test_groups_listing_and_filters(mirror: Any, scenarios: dict[str, Any]) -> None:
    status, body = get(f"{mirror.http.url}/groups")
    assert status == 200 and body["count"] == len(body["groups"])
    listed = {g["group_id"]: g for g in body["groups"]}
    crange = next(iter(scenarios["classic_range"].groups))
    row = listed[crange]
    assert (row["kind"], row["state"], row["members"], row["offsets"]) == ("classic", "Stable", 2, 4)
    assert isinstance(row["epoch"], int) and row["last_change_ms"] > 0
    status, body = get(f"{mirror.http.url}/groups?kind=consumer")
    assert body["groups"] and {g["kind"] for g in body["groups"]} == {"consumer"}
    # deleted groups and the aborted transaction's group are absent
    assert next(iter(scenarios["delete_group"].groups)) not in listed
    assert next(iter(scenarios["txn_abort"].groups)) not in listed


@pytest.mark.broker
@pytest.mark.spark
def test_offsets_carry_expiry_predictions(mirror: Any, scenarios: dict[str, Any]) -> None:
    simple = next(iter(scenarios["assign_only"].groups))
    _, snap = get(group_url(mirror, simple))
    retention = mirror.settings.retention_ms
    for o in snap["offsets"]:  # offsets-only group: commit time + retention (4.x rule)
        assert o["expires_at_ms"] == o["commit_timestamp_ms"] + retention
        assert o["expires_at"].endswith("Z")
    stable = next(iter(scenarios["classic_range"].groups))
    _, snap = get(group_url(mirror, stable))
    assert all(o["expires_at_ms"] is None for o in snap["offsets"])  # subscribed, Stable: never
    retained = next(iter(scenarios["explicit_retention"].groups))
    _, snap = get(group_url(mirror, retained))
    assert all(o["expires_at_ms"] == o["expire_timestamp_ms"] for o in snap["offsets"])  # value v1 wins


@pytest.mark.broker
@pytest.mark.spark
def test_service_endpoints(mirror: Any) -> None:
    status, ready = get(f"{mirror.http.url}/ready")
    assert status == 200 and ready["ready"] and ready["records_behind"] == 0
    assert set(ready["partitions"]) == {str(p) for p in range(5)}
    status, health = get(f"{mirror.http.url}/healthz")
    assert status == 200 and health["healthy"]
    assert get(f"{mirror.http.url}/nope")[0] == 404
    status, body = get(f"{mirror.http.url}/groups/{urllib.parse.quote('no such group/ü')}")
    assert (status, body["group_id"]) == (404, "no such group/ü")


# ---------------------------------------------------------------------------------------- sinks
def _read_topic(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    from streaming.app.capture_cmd import iter_topic

    return [(r.key, r.value) for r in iter_topic(bootstrap, topic=topic, timeout_s=30)]


@pytest.mark.broker
@pytest.mark.spark
def test_change_events_reach_files_and_kafka(
    mirror: Any, kafka: Any, scenarios: dict[str, Any], workdir: Path
) -> None:
    def both() -> tuple[list[dict[str, Any]], list[tuple[bytes | None, bytes | None]]]:
        # the batches' and the driver's events, and the lag rounds' consumer-health events
        # (group_status_changed ...): every file the events topic has a record for
        files = sorted(
            f for pattern in ("events-*.jsonl", "health-*.jsonl") for f in (workdir / "events").glob(pattern)
        )
        events = [json.loads(line) for f in files for line in f.read_text().splitlines()]
        return events, _read_topic(kafka.bootstrap, EVENTS_TOPIC)

    # a micro-batch may write events between the two reads (an expiry deadline of the scenarios
    # comes due while the module runs): read both again until no batch came between them
    deadline = time.monotonic() + 60
    while len((got := both())[0]) != len(got[1]) and time.monotonic() < deadline:
        time.sleep(1)
    events, from_kafka = got
    crange = next(iter(scenarios["classic_range"].groups))
    types = {e["type"] for e in events if e["group_id"] == crange}
    assert {"group_created", "rebalance_completed", "member_joined", "offsets_committed"} <= types
    deleted = next(iter(scenarios["delete_group"].groups))
    assert "group_deleted" in {e["type"] for e in events if e["group_id"] == deleted}
    assert len(from_kafka) == len(events)
    assert {k.decode() for k, _ in from_kafka if k} >= {crange, deleted}
    assert sorted(json.loads(v)["type"] for _, v in from_kafka if v) == sorted(e["type"] for e in events)


@pytest.mark.broker
@pytest.mark.spark
def test_committed_offsets_feed_is_a_compacted_topic(
    mirror: Any, kafka: Any, scenarios: dict[str, Any]
) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    config = next(iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, OFFSETS_TOPIC)]).values()))
    assert config.result()["cleanup.policy"].value == "compact"
    latest: dict[tuple[str, str, int], Any] = {}
    for key, value in _read_topic(kafka.bootstrap, OFFSETS_TOPIC):
        assert key is not None
        k = json.loads(key)
        latest[(k["group"], k["topic"], k["partition"])] = None if value is None else json.loads(value)
    crange = scenarios["classic_range"]
    group = next(iter(crange.groups))
    for (topic, partition), offset in crange.facts["committed"].items():
        row = latest[(group, topic, partition)]
        assert row["offset"] == offset and row["commit_timestamp_ms"] > 0 and "expires_at_ms" in row
    # Deleted offsets end as tombstones -- or were never published, when the mirror saw the commit
    # and its deletion in the same micro-batch (nothing to retract).
    deleted = scenarios["delete_group"]
    for topic, partition in deleted.facts["committed_before_delete"]:
        assert latest.get((next(iter(deleted.groups)), topic, partition)) is None
    dropped = scenarios["delete_offsets"]
    for topic, partition in dropped.facts["deleted"]:
        assert latest.get((next(iter(dropped.groups)), topic, partition)) is None
    kept = {(next(iter(dropped.groups)), t, p) for t, p in dropped.facts["committed"]}
    assert all(latest[k] is not None for k in kept)


# -------------------------------------------------------------------------------------- restart
@pytest.mark.broker
@pytest.mark.spark
def test_restart_resumes_from_the_checkpoint(mirror: Any, mirrors: Any, kafka: Any, workdir: Path) -> None:

    before = {
        g["group_id"]: get(group_url(mirror, g["group_id"]))[1]
        for g in get(f"{mirror.http.url}/groups")[1]["groups"]
    }
    positions = mirror.status.positions()
    last_batch = mirror.status.last_batch.batch_id
    mirror.stop()
    again = mirrors.start(mirror_settings(kafka, workdir))
    # the driver store is rebuilt from the checkpointed state before any new batch ran
    assert again.recovered_groups == len(before)
    assert again.wait_ready(120)
    again.wait_batches(1, 120)
    deadline = time.monotonic() + 30  # the progress follower reads Spark's progress after the sink
    while not (later := [p for p in again.progress_history if p["batch_id"] > last_batch]):
        assert time.monotonic() < deadline, again.progress_history[-3:]
        time.sleep(0.2)
    first = later[0]
    assert first["input_rows"] < sum(positions.values()), "re-read the topic from the start"
    after = {
        g["group_id"]: get(group_url(again, g["group_id"]))[1]
        for g in get(f"{again.http.url}/groups")[1]["groups"]
    }
    assert after.keys() == before.keys()
    for group_id, snap in before.items():
        assert after[group_id]["members"] == snap["members"], group_id
        assert after[group_id]["offsets"] == snap["offsets"], group_id
        assert (after[group_id]["state"], after[group_id]["type"]) == (snap["state"], snap["type"])


# ----------------------------------------------------------------------------- the parts, unstarted
def test_the_process_parts_in_start_order(tmp_path: Path) -> None:
    """Client JVM, the session (made while the cluster's parts start), HTTP before the cluster (503
    while it starts; serving until its query stopped), the cluster's group, the heap last."""
    from lab.synthetic import settings
    from streaming.app.mirror import HttpPart, JvmPart, Mirror
    from streaming.lifecycle import PartGroup

    m = Mirror(settings(checkpoint_location=str(tmp_path / "cp"), cluster_name="east"))
    assert [p.name for p in m.parts] == ["jvm", "spark", "http", "cluster east", "heap"]
    assert m.parts.parts[3] is m.cluster.parts and isinstance(m.cluster.parts, PartGroup)
    assert isinstance(m.parts.parts[0], JvmPart) and m.jvm_part.needed
    assert isinstance(m.parts.parts[2], HttpPart) and m.http is None  # made at start, not before
    # the cluster's parts reach the client JVM through the process's part: one JVM for all
    assert m.cluster.client is not None and m.cluster.client.jvm == m.jvm_part.get

    quiet = Mirror(settings(checkpoint_location=str(tmp_path / "cp2")), serve_http=False)
    assert [p.name for p in quiet.parts] == ["jvm", "spark", "cluster synthetic", "heap"]


def test_a_capture_mirror_launches_no_client_jvm_at_start(tmp_path: Path) -> None:
    from lab.synthetic import settings
    from streaming.app.mirror import Mirror

    capture = tmp_path / "c.jsonl"
    capture.write_text("")
    m = Mirror(settings(source="capture", capture_path=capture, checkpoint_location=str(tmp_path / "cp")))
    assert not m.jvm_part.needed
    m.jvm_part.start()  # nothing to launch
    assert m.jvm_part.jvm is None


def test_a_mirror_not_started_says_so_and_stops_as_a_no_op(tmp_path: Path) -> None:
    from lab.synthetic import settings
    from streaming.app.mirror import Mirror

    m = Mirror(settings(checkpoint_location=str(tmp_path / "cp")))
    assert m.health() == (True, {"query": "starting"})  # not ready before the query's first start
    assert not m.status.ready
    assert m.query is None and m.sink is None and m.recovered_groups == 0 and not m.query_running()
    m.stop()
    m.stop()
    assert m.health() == (False, {"error": "stopped"})
    assert m.parts.running == []
