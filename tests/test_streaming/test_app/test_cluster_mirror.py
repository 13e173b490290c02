"""One cluster's mirror (`streaming.app.cluster_mirror.ClusterMirror`) without a broker or Spark:
its parts in start order for each kind of source; the share-state query's wiring (its supervisor
among the parts, the lag rounds told about share-partitions, ``share_state`` in a group's
response) present only when it runs; a failure at start -- the client JVM, then the Spark session
-- stops whatever had started, in reverse, and raises; the lag route's 404 reasons; as one of several
clusters (`ClusterRunner`): its threads named after it, a failed start reported once per cause and
retried with fresh parts over the same state.  The cluster running for real: test_mirror.py and the
live suites."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from lab.synthetic import settings, stable_classic, to_store_row
from streaming.app.cluster_mirror import BackfillPart, ClientPart, ClusterMirror, ClusterRunner, QueryPart
from streaming.app.errors import EXIT_UNREACHABLE, StartupError
from streaming.app.lag_loop import LagLoop
from streaming.app.preview import Preview
from streaming.app.supervisor import QuerySupervisor, SideQuerySupervisor
from streaming.app.wake import ExpiryWake
from streaming.lifecycle import Step, Worker
from streaming.pipeline.progress import ProgressFollower
from streaming.settings import Settings

KAFKA_PARTS = [
    "client",
    "backfill",
    "checkpoint",
    "outputs",
    "lag-reader",
    "offsets",
    "progress",
    "offset-history",
    "preview",
    "query",
    "wake",
    "share_state",
    "supervisor",
]


class NoSpark:
    """The session part as the cluster sees it: this one never comes up."""

    name = "spark"
    owned = True
    session = None

    def __init__(self) -> None:
        self.asked = 0

    def get(self) -> Any:
        self.asked += 1
        raise RuntimeError("the Spark session did not start")

    def wait_warm(self) -> None:
        pass


def _unreachable() -> Any:
    raise StartupError("cannot reach the Kafka cluster at b:9092.", EXIT_UNREACHABLE)


def _cluster(s: Settings, session: Any | None = None) -> ClusterMirror:
    return ClusterMirror(s, jvm=_unreachable, session=session or NoSpark(), stopping=lambda: False)


def _capture_settings(tmp_path: Path) -> Settings:
    capture = tmp_path / "c.jsonl"
    capture.write_text("")
    return settings(source="capture", capture_path=capture, checkpoint_location=str(tmp_path / "cp"))


def test_a_kafka_clusters_parts_in_start_order() -> None:
    c = _cluster(settings())
    assert [p.name for p in c.parts] == KAFKA_PARTS
    kinds = [type(p) for p in c.parts]
    assert kinds == [
        ClientPart, BackfillPart, Step, Step, Step, LagLoop, ProgressFollower, Step, Preview,
        QueryPart, ExpiryWake, SideQuerySupervisor, QuerySupervisor,
    ]  # fmt: skip
    # the parts the cluster hands out are the ones in its list
    assert c.client is c.parts.parts[0] and c.query is c.parts.parts[9] and c.supervisor is c.parts.parts[-1]
    assert c.preview is c.parts.parts[8] and c.share_state is c.parts.parts[11]
    assert c.parts.name == "cluster synthetic"


def test_without_the_preview_no_part_follows_the_topic() -> None:
    off = _cluster(settings(preview=False))
    assert [p.name for p in off.parts] == [n for n in KAFKA_PARTS if n != "preview"]
    assert off.preview is None


def test_without_the_share_state_query_nothing_of_it_is_wired() -> None:
    on, off = _cluster(settings()), _cluster(settings(share_state_enabled=False))
    assert [p.name for p in off.parts] == [n for n in KAFKA_PARTS if n != "share_state"]
    assert off.share_state is None and off.share_view() is None
    assert on.share_view() is not None
    # the lag rounds read share-partitions' ends only when the query runs
    assert len(on.lag._also_wanted) == 1 and off.lag._also_wanted == []


def test_without_the_offset_history_no_part_and_no_offsets_route() -> None:
    """``offset_history_enabled: false``: no part, no share-state listener, and the cluster's view
    has no ``/groups/{id}/offsets`` hook (the API answers 404 offset_history_off)."""
    on, off = _cluster(settings()), _cluster(settings(offset_history_enabled=False))
    assert [p.name for p in off.parts] == [n for n in KAFKA_PARTS if n != "offset-history"]
    assert off.offset_history is None and off.view().offsets_at is None
    assert off.share_store.listeners == []
    assert on.offset_history is not None and on.view().offsets_at is not None
    assert on.share_store.listeners == [on.offset_history.on_share_state]


def test_a_capture_source_has_no_client_no_share_state_and_no_source_check(tmp_path: Path) -> None:
    c = _cluster(_capture_settings(tmp_path))
    # no preview either: it follows a Kafka topic
    skipped = ("client", "share_state", "preview")
    assert [p.name for p in c.parts] == [n for n in KAFKA_PARTS if n not in skipped]
    assert c.client is None and c.share_state is None
    assert c.supervisor.check_source is None and c.supervisor.reconcile is None
    assert not c.backfill.wanted  # the backfill is read from Kafka only


def test_the_client_failing_at_start_leaves_nothing_started() -> None:
    c = _cluster(settings())
    with pytest.raises(StartupError, match="cannot reach the Kafka cluster"):
        c.parts.start()
    assert c.parts.running == []
    assert c.client is not None and c.client.client is None


def test_the_session_failing_at_the_query_stops_the_threads_started_before_it(tmp_path: Path) -> None:
    """A capture source gets as far as the query without a cluster: the progress follower's
    thread is running when the query asks for the session, and stopped again -- in reverse --
    once the session's failure reaches the group."""
    session = NoSpark()
    c = _cluster(_capture_settings(tmp_path), session)
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(RuntimeError, match="the Spark session did not start"):
        c.parts.start()
    assert session.asked == 1
    assert c.parts.running == []
    assert c.progress.started and not c.progress.alive() and c.progress.stopping
    assert not c.lag_loop.started  # a capture source reads no log offsets: no thread at all
    assert {t.name for t in threading.enumerate() if t.is_alive()} - before == set()
    c.parts.stop()  # and a stop after that is a no-op


def test_stopping_a_cluster_that_never_started_is_a_no_op() -> None:
    c = _cluster(settings())
    c.parts.stop()
    c.query.stop()
    assert c.client is not None
    c.client.stop()
    c.backfill.stop()
    assert not c.query_running()
    assert c.offset_reader is None


def test_the_lag_routes_404_says_why_a_group_has_no_lag() -> None:
    c = _cluster(settings(group_deny_regex="internal-.*"))
    g = stable_classic("orders/ü", 2)
    c.store.apply(1, [to_store_row(g)])
    status, body = c.lag_route("/groups/internal-x/lag")  # type: ignore[misc]
    assert (status, body["reason"]) == (404, "filtered")
    status, body = c.lag_route("/groups/orders%2F%C3%BC/lag")  # type: ignore[misc]
    assert (status, body["group_id"], body["reason"]) == (404, "orders/ü", "pending")
    status, body = c.lag_route("/groups/nobody/lag")  # type: ignore[misc]
    assert (status, body["reason"]) == (404, "unknown")
    assert c.lag_route("/groups/x") is None  # not a lag path


# ------------------------------------------------------------------ one of several clusters
def test_a_cluster_not_started_is_not_ready_and_says_it_is_starting() -> None:
    c = _cluster(settings())
    assert c.status.waiting_reason == "starting" and not c.status.ready


def test_one_of_several_clusters_names_its_threads() -> None:
    c = ClusterMirror(
        settings(cluster_name="east"),
        jvm=_unreachable,
        session=NoSpark(),
        stopping=lambda: False,
        isolated=True,
    )  # type: ignore[arg-type]
    threads = {p.name: p.thread_name for p in c.parts if isinstance(p, Worker)}
    assert threads["offsets"] == "mirror-offsets-east" and threads["supervisor"] == "mirror-supervisor-east"


def test_a_failed_start_is_reported_once_per_cause_and_retried_with_fresh_parts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`ClusterRunner`: the cluster's /ready reason and source say why, one log line per new
    cause naming the cluster, the restart policy's backoff, new parts over the same state -- whose
    share-state wiring is not registered twice."""
    c = ClusterMirror(
        settings(cluster_name="west", query_restart_backoff_s=2, query_restart_backoff_max_s=5),
        jvm=_unreachable, session=NoSpark(), stopping=lambda: False, isolated=True,  # type: ignore[arg-type]
    )  # fmt: skip
    runner = ClusterRunner(c, 1)
    assert (runner.name, runner.thread_name) == ("cluster west", "mirror-cluster-west")
    first_parts, store = c.parts, c.store
    with caplog.at_level(logging.ERROR, logger="coordinator_mirror"):
        assert runner.work() is None  # not done: to be tried again
        assert runner.work() is None
    assert runner.failures == 2 and runner.interval_s == 4.0  # 2 s, doubled
    assert (
        c.status.waiting_reason
        == "start failed: clusters[1] (west): cannot reach the Kafka cluster at b:9092."
    )
    assert not c.status.source_up
    assert [r.getMessage() for r in caplog.records] == [
        "clusters[1] (west): cannot reach the Kafka cluster at b:9092. -- trying again in 2s; "
        "the other clusters go on"
    ]  # the same cause the second time: not logged again
    assert c.parts is not first_parts and c.store is store  # fresh parts, the same state
    assert len(c.lag._also_wanted) == 1
    runner.stop()  # stops the cluster's parts (none running)
    assert c.parts.running == []


def test_mirror_json_keeps_the_last_trigger_of_a_quiet_query() -> None:
    """A query with no new records runs no batch for hours; its triggers say it was up and read the
    topic to its end -- the next start must not take that time for downtime (`CheckpointClaim`)."""
    from streaming.serving.status import BatchStats

    c = _cluster(settings())
    kept: list[int] = []
    c.claim = type("Claim", (), {"keep": lambda self, ms: kept.append(ms)})()  # type: ignore[assignment]
    c.status.batch_done(BatchStats(batch_id=3, finished_at_ms=1_000))
    c._keep_meta()
    c.status.triggered(90_000)  # idle triggers since
    c._keep_meta()
    c.status.batch_done(BatchStats(batch_id=4, finished_at_ms=95_000))
    c._keep_meta()
    assert kept == [1_000, 90_000, 95_000]
