"""Share groups end to end: a real share consumer that accepts, releases and rejects records
(`lab.scenarios_insights.share_acks`), the mirror's `__share_group_state` query on the session
broker, and Kafka's own view of the same share group -- ``kafka-share-groups.sh --describe
--offsets`` (Kafka 4.3.1's ShareGroupCommand, run from the broker's jars).

Asserted: per share-partition the mirror's start offset and lag equal Kafka's; the delivery state
the mirror folded agrees, record by record, with what the consumer did (accepted -> acknowledged,
rejected -> archived, released then accepted -> delivered twice); the broker's delivery complete
count equals the acknowledged + archived records of the folded state; ``GET /groups/{id}`` carries
``share_state`` and ``/metrics`` the share families; undecodable records of the topic are counted
and kept with their partition and offset while the query goes on (`fold_share`, real bytes).
``GET /groups/{id}/lag`` of a share group on three partitions, records unread on each, gives Kafka's
start offset (as ``committed_offset``) and share lag on every partition -- with its member, empty,
and empty while records arrive.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lab.scenarios_insights import ACCEPT, REJECT
from tests.support.live_mirror import get, group_url, live_settings
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.broker, pytest.mark.spark]

#: kafka-share-groups.sh's class
SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def kafka_share_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int, int]]:
    """``kafka-share-groups.sh --describe --offsets``: (topic, partition) -> (start offset, lag)."""
    from streaming.jars import kafka_classpath

    out = subprocess.run(
        ["java", "-Xmx256m", "-cp", kafka_classpath(), SHARE_GROUP_COMMAND,
         "--bootstrap-server", bootstrap, "--describe", "--group", group, "--offsets"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    rows = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0] == group and re.fullmatch(r"-?\d+", parts[3]):
            rows[(parts[1], int(parts[2]))] = (int(parts[3]), int(parts[4]))
    assert rows, out.stdout + out.stderr
    return rows


@pytest.fixture(scope="module")
def mirror(
    module_mirrors: Any, kafka: Any, share_acks_result: Any, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    settings = live_settings(kafka.bootstrap, tmp_path_factory.mktemp("share-live"), cluster_name="share")
    return module_mirrors.start(settings, ready_s=300)


def _share_state(mirror: Any, group: str, want: dict[tuple[str, int], tuple[int, int]]) -> dict[str, Any]:
    """The mirror's share_state of ``group`` once it shows Kafka's start offsets and lags."""
    url = group_url(mirror, group)
    deadline = time.monotonic() + 120
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        state = get(url).get("share_state") or {}
        got = {
            (x["topic"], x["partition"]): (x["start_offset"], x["lag"]) for x in state.get("partitions", ())
        }
        if got == want:
            return state
        time.sleep(1)
    raise AssertionError(f"the mirror's share state never matched Kafka's {want}: {state}")


def test_share_partitions_agree_with_kafka_share_groups_describe(
    mirror: Any, kafka: Any, share_acks_result: Any
) -> None:
    group = share_acks_result.group.group_id
    facts = share_acks_result.facts
    kafka_view = kafka_share_offsets(kafka.bootstrap, group)
    assert all(lag == facts["left_over"] for _, lag in kafka_view.values())  # Kafka: the unconsumed records
    state = _share_state(mirror, group, kafka_view)
    acked = {tuple(map(int, k.split(":"))): a for k, a in facts["acknowledged"].items()}
    deliveries = {tuple(map(int, k.split(":"))): n for k, n in facts["deliveries"].items()}
    for x in state["partitions"]:
        p = x["partition"]
        # the broker's delivery complete count = what the folded state holds as done
        assert x["delivery_complete_count"] == x["complete_in_state"] == x["acknowledged"] + x["archived"]
        for b in x["state_batches"]:
            for offset in range(b["first_offset"], b["last_offset"] + 1):
                want = {ACCEPT: "acknowledged", REJECT: "archived"}[acked[(p, offset)]]
                assert b["delivery_state"] == want, (p, offset, b)
                assert b["delivery_count"] == deliveries[(p, offset)], (p, offset, b)
        assert x["start_offset"] > min(o for q, o in acked if q == p)  # settled records left the window
    assert state["lag"] == sum(lag for _, lag in kafka_view.values())


def _lag_matches_kafka(mirror: Any, kafka: Any, group: str, what: str) -> dict[str, Any]:
    """``GET /groups/{id}/lag`` once its partitions -- (committed_offset, lag) per partition, the
    start offset standing in for the committed offset -- equal Kafka's ``listShareGroupOffsets``
    (``kafka-share-groups.sh --describe --offsets``) on every partition.  Kafka is asked again each
    time, so a lag round the mirror has not run yet is waited for, not a figure frozen early."""
    seen: dict[str, Any] = {}

    def agrees() -> Any:
        seen["kafka"] = kafka_share_offsets(kafka.bootstrap, group)
        seen["mirror"] = body = get(group_url(mirror, group, "/lag"))
        got = {(x["topic"], x["partition"]): (x["committed_offset"], x["lag"]) for x in body["partitions"]}
        return got == seen["kafka"] and body

    return wait_for(f"/lag equal to Kafka's share offsets, {what}", agrees, 120, lambda: seen)


def test_share_lag_in_the_lag_route_equals_kafkas_on_every_partition_with_members_and_empty(
    mirror: Any, kafka: Any, lab: Any
) -> None:
    """A share group on three partitions with records left unread on each: ``GET /groups/{id}/lag``
    gives, per partition, Kafka's start offset (as ``committed_offset``) and Kafka's share lag --
    while its consumer is a member, once it left (the group empty: the old route dropped one of
    three partitions then), and after more records arrived with nobody there."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    from lab.lab import quiet_logger

    parts, unread = 3, 40
    topic = lab.topic("share-lag", partitions=parts, messages_per_partition=0)
    group = lab.name("share-lag")
    consumer = ShareConsumer({
        "bootstrap.servers": kafka.bootstrap, "group.id": group, "client.id": "cm-share-lag",
        "share.acknowledgement.mode": "explicit", "log_level": 0, "logger": quiet_logger(),
    })  # fmt: skip
    lab.adopt(consumer)
    consumer.subscribe([topic])
    lab.wait_group(
        group, lambda v: v.state == "Stable" and len(v.assigned) == parts, what="one member on 3 partitions"
    )
    # share-partitions start at the log end when first fetched: a record a partition until each
    # delivered one (accepted), so every partition is initialised with its start past them
    seen: set[int] = set()
    deadline = time.monotonic() + 90
    while seen != set(range(parts)):
        assert time.monotonic() < deadline, f"partitions {sorted(seen)} delivered in 90s"
        lab.produce(topic, parts, 1)
        batch = consumer.poll(0.5) or []
        for msg in batch:
            if msg.error() is None:
                consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
                seen.add(msg.partition())
        if batch:
            consumer.commit_sync(30)
    lab.produce(topic, parts, unread)  # never polled: unread on every partition

    view = lab.describe(group)[group]
    assert view.state == "Stable" and len(view.members) == 1, view  # the member is still there
    body = _lag_matches_kafka(mirror, kafka, group, "with its member")
    assert len(body["partitions"]) == parts
    assert all(x["lag"] >= unread for x in body["partitions"]), body
    assert all(x["end_offset"] is not None for x in body["partitions"]), body
    assert body["partitions"][0]["consumer_id"], body  # the member owns them

    consumer.close()
    lab.wait_group(group, lambda v: v.state == "Empty", what="Empty share group")
    body = _lag_matches_kafka(mirror, kafka, group, "empty")
    assert len(body["partitions"]) == parts, body
    before = {x["partition"]: x["lag"] for x in body["partitions"]}

    lab.produce(topic, parts, 5)  # nobody reads: the share lag grows on every partition
    body = _lag_matches_kafka(mirror, kafka, group, "empty, 5 more records a partition")
    assert {x["partition"]: x["lag"] for x in body["partitions"]} == {p: n + 5 for p, n in before.items()}


def test_share_metrics_are_exported(mirror: Any, share_acks_result: Any) -> None:
    group = share_acks_result.group.group_id
    text = get(f"{mirror.http.url}/metrics").decode()
    lines = [ln for ln in text.splitlines() if f'group="{group}"' in ln]
    assert any(ln.startswith("coordinator_mirror_share_partition_lag{") for ln in lines), lines
    assert any(ln.startswith("coordinator_mirror_share_group_lag{") for ln in lines)
    assert any(
        'state="archived"' in ln and ln.startswith("coordinator_mirror_share_partition_records{")
        for ln in lines
    )
    assert re.search(
        r'coordinator_mirror_share_state_records_total\{cluster_name="share",status="ok"\} [1-9]', text
    )
    assert mirror.share_state is not None and mirror.share_state.running()


def test_undecodable_records_are_counted_and_kept_never_fatal() -> None:
    """`fold_share` (the query's stateful function) over real bytes of a share group and damaged
    ones: the damaged record becomes an error row with its partition and offset, the group's state
    is still folded from the good ones."""
    from streaming.pipeline.share_state import ShareSink, fold_share, pack_rows

    vectors = json.loads(
        (Path(__file__).resolve().parents[1] / "vectors" / "kafka-4.3.1-share-state.json").read_text()
    )
    good = next(v for v in vectors["vectors"] if v["key"] and v["value"] and v["scenario"] == "share_acks")
    key, value = bytes.fromhex(good["key"]), bytes.fromhex(good["value"])
    import pyarrow as pa

    batch = pa.record_batch({
        "key": [key, key, b"\x00"],
        "value": [value, value[:9], b"\x00"],
        "partition": pa.array([0, 0, 1], pa.int32()),
        "offset": pa.array([10, 11, 12], pa.int64()),
        "timestamp": pa.array([1, 2, 3], pa.int64()),
    })  # fmt: skip
    packed = next(iter(pack_rows([batch]))).to_pydict()
    by_group = dict(zip(packed["group_id"], packed["packed"], strict=True))
    assert set(by_group) == {good["group"], None}

    class State:
        exists = False
        removed = False
        value: Any = None

        def update(self, v: Any) -> None:
            self.exists, self.value = True, v

        @property
        def get(self) -> Any:
            return self.value

        def remove(self) -> None:
            self.removed = True

    rows = []
    for gid, blob in by_group.items():
        gs = State()
        for frame in fold_share((gid,), iter([pd.DataFrame({"packed": [blob]})]), gs):
            rows += frame.to_dict("records")
        if gid is not None:
            assert gs.exists  # the good record folded: the group has a state
    errors = [json.loads(r["body"]) for r in rows if r["kind"] == "error"]
    assert {(e["source_partition"], e["source_offset"], e["status"]) for e in errors} == {
        (0, 11, "error"),
        (1, 12, "error"),
    }

    class Frame:  # what foreachBatch hands over: .collect()
        def __init__(self, rows: list[dict[str, Any]]) -> None:
            self.rows = [type("Row", (), r) for r in rows]

        def collect(self) -> list[Any]:
            return self.rows

    from streaming.serving.share import ShareStateStore
    from streaming.serving.store import SnapshotStore

    store, main = ShareStateStore(), SnapshotStore()
    sink = ShareSink(store, main)
    sink(Frame(rows), 0)  # type: ignore[arg-type]
    sink(Frame(rows), 0)  # the same batch again after a restart: counted once
    assert store.records == {"ok": 1, "error": 2, "unknown": 0}
    assert len(store.errors) == 2 and len(main.errors) == 2
    assert {e["topic"] for e in main.errors} == {"__share_group_state"}
    assert store.blob(good["group"]) is not None


def test_a_failing_share_state_query_is_restarted_counted_and_reported_while_the_main_one_runs(  # noqa: PLR0917
    mirrors: Any, spark: Any, kafka: Any, lab: Any, share_acks_result: Any, tmp_path: Path
) -> None:
    """The share-state query stops under the mirror (as a lost executor or a failed batch ends it)
    and its checkpoint is unusable -- its ``offsets`` log a file, not a folder -- so that every
    restart fails for real: the supervisor restarts it with the main query's backoff, counts each
    failure, reports it in ``/ready``'s ``parts`` and the metrics, and ``/ready`` stays 200 while
    the main query goes on mirroring commits.  Once the checkpoint is whole again the next restart
    runs it, counted as a restart."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    from streaming.pipeline.share_state import checkpoint_of

    settings = live_settings(
        kafka.bootstrap, tmp_path, cluster_name="share-fail", query_restart_backoff_s=1,
        query_restart_backoff_max_s=2,
    )  # fmt: skip
    # a session of its own (the module's mirror runs queries of the same names)
    mirror = mirrors.start(settings, ready_s=300, spark=spark.newSession())
    deadline = time.monotonic() + 180
    while not mirror.share_state.running() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert mirror.share_state.running(), get(f"{mirror.http.url}/ready")["parts"]
    offsets = Path(checkpoint_of(settings)) / "offsets"
    assert offsets.is_dir()
    offsets.rename(offsets.with_name("offsets.kept"))
    offsets.write_text("not a folder\n")
    mirror.share_state.query.stop()  # the query ends under its supervisor
    deadline = time.monotonic() + 120
    ready: dict[str, Any] = {}
    while time.monotonic() < deadline:
        ready = get(f"{mirror.http.url}/ready")
        if ready["parts"]["share_state"]["failures"] >= 3:
            break
        time.sleep(0.5)
    share = ready["parts"]["share_state"]
    assert share["failures"] >= 3 and share["state"] == "restarting" and share["failure"], share
    assert ready["ready"] is True and ready["reason"] is None  # never gates readiness
    text = get(f"{mirror.http.url}/metrics").decode()
    assert (
        'coordinator_mirror_share_state_query_state{cluster_name="share-fail",state="restarting"} 1' in text
    )
    failures = re.search(
        r'coordinator_mirror_share_state_query_failures_total\{cluster_name="share-fail"\} (\d+)', text
    )
    assert failures is not None and int(failures.group(1)) >= 3
    # the main query goes on: a commit made now is mirrored
    group, topic = lab.name("share-fail-probe"), lab.topic("share-fail-probe-t", 1, 10)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    done = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 7)])]
    )
    for future in done.values():
        future.result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        snap = get(f"{mirror.http.url}/groups").get("groups")
        if any(g["group_id"] == group for g in snap):
            break
        time.sleep(0.5)
    assert any(g["group_id"] == group for g in snap)
    # whole again: the next restart runs it
    offsets.unlink()
    offsets.with_name("offsets.kept").rename(offsets)
    deadline = time.monotonic() + 60
    while not mirror.share_state.running() and time.monotonic() < deadline:
        time.sleep(0.5)
    share = get(f"{mirror.http.url}/ready")["parts"]["share_state"]
    assert mirror.share_state.running() and share["state"] == "running" and share["restarts"] >= 1, share
    assert share["failure"] is None
