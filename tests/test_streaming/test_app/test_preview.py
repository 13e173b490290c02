"""The preview (`streaming.app.preview`) on the session broker: groups of every kind made after
ready are served by a mirror whose query runs no micro-batch meanwhile (a trigger of thirty days), in
``GET /groups/{id}`` and /metrics exactly as a mirror without the preview serves them once its
batches have folded them; then
the preview's mirror restarted runs its batches over the same records and ends in the same state.
"""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import pyarrow as pa
import pytest

from streaming.app.preview import Preview
from streaming.cluster.topic_read import RAW_SCHEMA
from streaming.serving.render import snapshot_renderer
from streaming.serving.store import SnapshotStore
from tests.support.exposition import parse
from tests.support.http import get
from tests.support.live_mirror import group_url, live_settings
from tests.support.records import commit_key, commit_value

#: scenarios run after the mirrors are ready: classic and KIP-848 groups joining, leaving and
#: committing, transactional commits (committed and aborted), deletions of groups and offsets, a
#: kafka-python group, a group that only assigns
SCENARIOS = (
    "classic_range",
    "member_leave",
    "kafka_python_empty",
    "assign_only",
    "kip848_consumer",
    "txn_commit",
    "txn_abort",
    "delete_group",
    "delete_offsets",
)


def _groups(mirror: Any, names: set[str]) -> dict[str, Any]:
    return {gid: get(group_url(mirror, gid)) for gid in sorted(names)}


def _agree(preview: Any, reference: Any, names: set[str], timeout_s: float) -> dict[str, Any]:
    """The two mirrors' answers for ``names`` once they agree (the reference's batches follow)."""
    deadline = time.monotonic() + timeout_s
    while True:
        mine, theirs = _groups(preview, names), _groups(reference, names)
        if mine == theirs:
            return mine
        if time.monotonic() > deadline:
            diff = {g: (mine[g], theirs[g]) for g in names if mine[g] != theirs[g]}
            raise AssertionError(diff)
        time.sleep(1)


def _raw(rows: list[tuple[bytes, bytes | None, int, int]]) -> pa.RecordBatch:
    keys, values, parts, offsets = (list(c) for c in zip(*rows, strict=True))
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(parts, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array([1_700_000_000_000] * len(rows), pa.int64()),
        ],
        schema=RAW_SCHEMA,
    )


def test_raw_records_fold_into_the_served_state_past_where_it_ends(tmp_path: Any) -> None:
    """The thread's own steps on real record bytes, no broker: records the served states already
    hold are dropped, the rest decoded and folded per group with the query's code; a filtered
    group and an undecodable key fold nothing."""
    from streaming.settings import load_settings

    settings = load_settings(
        bootstrap_servers="127.0.0.1:9", checkpoint_location=str(tmp_path), group_deny_regex="deny-.*"
    )
    config = settings.offset_config()
    store = SnapshotStore(renderer=snapshot_renderer(config, settings.default_server_assignor))
    preview = Preview(settings, lambda: None, store, lambda: 1_700_000_100_000)  # type: ignore[arg-type,return-value]
    store.cover({4: 10, 7: 0})
    batch = _raw(
        [
            (commit_key("a+b/c=", "t-1", 0), commit_value(1), 4, 8),  # held already (below 10)
            (commit_key("a+b/c=", "t-1", 1), commit_value(2), 4, 9),
            (commit_key("a+b/c=", "t-1", 0), commit_value(5), 4, 10),
            (commit_key("Zm9v-_x", "t.2", 3), commit_value(7), 4, 11),
            (commit_key("deny-me", "t", 0), commit_value(9), 7, 0),
            (b"\x00\x09garbage", b"\x01", 7, 1),
            (commit_key("Zm9v-_x", "t.2", 4), commit_value(8), 4, 12),
        ]
    )
    unread = preview._unread(batch)
    assert unread.column("offset").to_pylist() == [10, 11, 0, 1, 12]
    assert preview.fold(unread) == 2
    offsets = {
        gid: {(o["topic"], o["partition"]): o["offset"] for o in store.group(gid)["offsets"]}  # type: ignore[index]
        for gid in store.group_ids()
    }
    assert offsets == {"a+b/c=": {("t-1", 0): 5}, "Zm9v-_x": {("t.2", 3): 7, ("t.2", 4): 8}}
    assert store.ahead() == 2
    # a tombstone for one offset, read again with a record already folded: the group is held
    # back for its batch, which then folds both
    again = _raw(
        [(commit_key("Zm9v-_x", "t.2", 3), None, 4, 12), (commit_key("Zm9v-_x", "t.2", 3), None, 4, 13)]
    )
    assert preview.fold(again) == 0
    assert store.preview_counts == {"folded": 2, "left": 1}
    # past the hold, a tombstone removes the offset
    store.apply(0, [], covered={4: 14, 7: 3})
    assert preview.fold(_raw([(commit_key("Zm9v-_x", "t.2", 3), None, 4, 14)])) == 1
    assert [o["partition"] for o in store.group("Zm9v-_x")["offsets"]] == [4]  # type: ignore[index]


@pytest.mark.broker
@pytest.mark.spark
def test_the_preview_serves_what_the_batches_will(
    mirrors: Any, spark: Any, kafka: Any, scenarios: dict[str, Any], tmp_path: Any
) -> None:
    from lab.lab import Lab
    from lab.scenarios import run_scenarios

    reference = mirrors.start(
        live_settings(kafka.bootstrap, tmp_path / "reference", preview=False), ready_s=300
    )
    # Spark runs a processing-time trigger at multiples of its interval since the epoch: an hour's
    # ran a batch at the top of the hour in one run of this test; thirty days' will not come
    settings = live_settings(
        kafka.bootstrap, tmp_path / "preview", preview=True, trigger_interval_s=30 * 86400.0
    )
    mirror = mirrors.start(settings, ready_s=300, spark=spark.newSession())
    mirror.wait_batches(1, 120)  # the seed batch (a trigger's first batch runs at once)
    batches = mirror.status.last_batch.batch_id
    assert mirror.store.covered(), "the preview knows where the served states end"

    lab = Lab(kafka.bootstrap, kafka.settings.kafka_version, run_id="pv")
    try:
        made = run_scenarios(lab, SCENARIOS)
    finally:
        lab.close()
    names = {gid for result in made.values() for gid in result.groups}
    assert len(names) >= len(SCENARIOS)

    served = _agree(mirror, reference, names, 120)
    # every one of them came through the preview: the mirror ran no micro-batch meanwhile
    assert mirror.status.last_batch.batch_id == batches
    exists = {g for g, (code, _body) in served.items() if code == 200}
    assert {g for g in names if "deleted" not in g and "abort" not in g} <= exists
    assert not any(code == 200 and body.get("exists") for g, (code, body) in served.items() if "deleted" in g)
    txn = next(iter(made["txn_commit"].groups))
    assert {o["offset"] for o in served[txn][1]["offsets"]} == {3, 4}
    aborted = next(iter(made["txn_abort"].groups))
    assert served[aborted][0] == 404 or not served[aborted][1]["offsets"]

    # and /metrics: the group series the store feeds, the same on both
    def group_series(m: Any) -> dict[Any, float]:
        with urllib.request.urlopen(f"{m.http.url}/metrics", timeout=60) as resp:
            samples = parse(resp.read())
        return {
            (k[0], tuple(kv for kv in k[1] if kv[0] != "cluster_name")): v
            for k, v in samples.items()
            if k[0] in ("coordinator_mirror_group_offsets", "coordinator_mirror_group_info")
            and names & {value for _label, value in k[1]}
        }

    shown = group_series(mirror)
    assert len(shown) >= 2 * len(exists)
    assert shown == group_series(reference)
    assert mirror.store.preview_counts["folded"] >= len(names)
    assert mirror.store.ahead() >= len(names) - 2  # the aborted transaction made no group

    # restarted with its batches running: they read every record the preview folded, and the
    # served states are the same
    mirror.stop()
    again = mirrors.start(
        settings.model_copy(update={"trigger_interval_s": 1.0}), ready_s=300, spark=spark.newSession()
    )
    again.wait_batches(1, 120)
    assert again.status.last_batch.batch_id > batches
    assert _agree(again, reference, names, 60) == served
