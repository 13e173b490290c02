"""The mirror on a real Spark standalone cluster (one master, two workers of one core each, on
loopback, from the installed pyspark): an executor JVM is killed with SIGKILL in the middle of a
micro-batch, Spark retries its tasks on a replacement executor, and the mirror ends exactly where the
coordinator is.

* The mirror runs as `coordinator-mirror run --spark-master spark://...` in a process of its own (a
  SparkSession is per process; the test session's shared local[2] session stays untouched), with
  its events in files; the test reads it through its HTTP API and Spark's REST API.
* The log is preloaded so that the mirror catches up over several micro-batches
  (``max_offsets_per_trigger``, ``backfill: query``); the executor is killed while one of its
  tasks runs and ``/ready`` still answers 503, i.e. inside a catch-up batch.
* "Equals an uninterrupted run": every group's ``GET /groups/{id}`` against Kafka's AdminClient
  (GroupProbe) read-back -- state, type, committed offsets, members, deleted groups absent -- and the
  change events against one uninterrupted fold of the same log (`lab.mirror_process.audit_events`):
  no discrete event lost, none repeated, the aggregate events' counts (``offsets_committed``,
  ``offsets_deleted``) add up per group, and the commits counted are the log's commit records.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.require import require

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]

GROUPS = 60
PARTITIONS = 8
ROUNDS = 25  # 60 x 8 x 25 = 12,000 commit records before the mirror starts
PER_TRIGGER = 1500  # so the catch-up takes several micro-batches
DELETED = 5  # groups deleted (DeleteGroups: offset tombstones + group tombstone)


def _commit_rounds(admin: Any, groups: list[str], topic: str, rounds: range) -> None:
    """Real OffsetCommit requests (AdminClient alter_consumer_group_offsets), all partitions each."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    futures = []
    for r in rounds:
        for i, g in enumerate(groups):
            tps = [TopicPartition(topic, p, 1 + r * 7 + p + i) for p in range(PARTITIONS)]
            futures += admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, tps)]).values()
    for fut in futures:
        fut.result(60)


def _kill_busy_executor(cluster: Any, mirror: Any, timeout_s: float = 600.0) -> tuple[str, int]:
    """Wait for a catch-up batch with a task running on an executor, then ``kill -9`` that JVM."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        mirror._check_alive()
        try:
            ready = mirror.get("/ready", 5)[0] == 200
            app = mirror.app_id()
            busy = [e for e in mirror.executors() if e["id"] != "driver" and e["activeTasks"] > 0]
        except (OSError, RuntimeError, IndexError, KeyError):
            time.sleep(0.2)
            continue
        assert not ready, "the mirror caught up before an executor could be killed mid-batch"
        if busy:
            victim = str(busy[0]["id"])
            pids = cluster.executor_pids(app)
            if victim in pids:
                return victim, cluster.kill_executor(victim, app)
        time.sleep(0.1)
    raise TimeoutError(f"no executor ran a task within {timeout_s}s:\n{mirror.log_tail()}")


def _failed_tasks(mirror: Any, victim: str, timeout_s: float = 120.0) -> int:
    """Once the driver noticed the loss: the tasks that failed with it (ExecutorLostFailure)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            executors = {e["id"]: e for e in mirror.executors(all_=True)}
        except (OSError, RuntimeError, IndexError):
            time.sleep(0.5)
            continue
        if victim in executors and not executors[victim]["isActive"]:
            return sum(int(e["failedTasks"]) for i, e in executors.items() if i != "driver")
        time.sleep(0.5)
    raise TimeoutError(f"the driver never noticed executor {victim}'s loss")


def _kill_executor_mid_batch(cluster: Any, mirror: Any, attempts: int = 6) -> tuple[str, int, int]:
    """Kill a busy executor; Spark's REST view lags on a loaded machine, so the task it showed may
    have finished just before the kill -- then kill the next busy one (at most ``attempts``)."""
    for _ in range(attempts):
        victim, pid = _kill_busy_executor(cluster, mirror)
        failed = _failed_tasks(mirror, victim)
        if failed:
            return victim, pid, failed
    raise AssertionError(f"{attempts} executors killed, none while running a task")


def test_executor_killed_mid_batch_ends_where_the_coordinator_is(
    kafka: Any, lab: Any, tmp_path: Path
) -> None:
    from confluent_kafka.admin import AdminClient

    from lab.mirror_process import MirrorProcess, audit_events, compare_group, read_events, read_log
    from lab.spark_cluster import ClusterStartError, StandaloneCluster

    started = time.monotonic()
    topic = lab.topic("cluster-t", partitions=PARTITIONS, messages_per_partition=1)
    groups = [lab.name(f"cluster-g{i:03d}") for i in range(GROUPS)]
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 0})
    _commit_rounds(admin, groups, topic, range(ROUNDS))
    for fut in admin.delete_consumer_groups(groups[:DELETED], request_timeout=60).values():
        fut.result(60)

    try:
        cluster = StandaloneCluster(workdir=tmp_path / "spark").start()
    except ClusterStartError as exc:
        require(False, f"a Spark standalone cluster from pyspark's jars: {exc}")
        raise
    mirror = MirrorProcess(
        tmp_path / "mirror",
        bootstrap=kafka.bootstrap,
        spark_master=cluster.master_url,
        # the query folds the backfill (in several micro-batches, to kill an executor in one)
        settings={
            "max_offsets_per_trigger": PER_TRIGGER,
            "cluster_name": "spark-cluster",
            "backfill": "query",
        },
        # one executor per worker, each within the worker's 1 core / 1g
        spark_conf={"spark.cores.max": "2", "spark.executor.cores": "1", "spark.executor.memory": "768m"},
    )
    try:
        mirror.start()
        victim, pid, failed = _kill_executor_mid_batch(cluster, mirror)
        killed_at = time.monotonic()
        mirror.wait_ready(600)
        recovered_s = time.monotonic() - killed_at

        # live after the loss: one more round for every surviving group, then the comparison
        _commit_rounds(admin, groups[DELETED:], topic, range(ROUNDS, ROUNDS + 1))
        views = lab.describe(*groups)
        problems: dict[str, str] = {}
        for _attempt in range(10):
            mirror.wait_batches(2, 300)  # every record written before the read-back is folded
            problems = {}
            for g in groups:
                status, snap = mirror.group(g)
                problem = compare_group(views[g], status, snap)
                if problem:
                    problems[g] = problem
            if not problems:
                break
        assert not problems, dict(list(problems.items())[:5])
        assert all(not views[g].exists or views[g].state == "Dead" for g in groups[:DELETED])
        listed = set(mirror.groups())
        assert listed >= set(groups[DELETED:]) and not listed & set(groups[:DELETED])

        # Spark really lost the executor and retried: the killed one is gone, a replacement runs
        executors = {e["id"]: e for e in mirror.executors(all_=True) if e["id"] != "driver"}
        assert not executors[victim]["isActive"], executors[victim]
        assert any(e["isActive"] for i, e in executors.items() if i != victim), executors
        assert pid not in cluster.executor_pids().values()
        assert sum(int(e["failedTasks"]) for e in executors.values()) >= failed >= 1, executors

        # no change event lost or repeated: against one uninterrupted fold of the same log
        audit = audit_events(read_events(tmp_path / "mirror" / "events"), read_log(kafka.bootstrap), groups)
        assert audit.discrete_expected >= GROUPS + DELETED, audit.summary()  # created + deleted at least
        assert audit.commits_expected >= (GROUPS - DELETED) * PARTITIONS * (ROUNDS + 1), audit.summary()
        assert audit.clean, (
            audit.summary(),
            audit.discrete_lost[:5],
            audit.duplicated[:5],
            list(audit.aggregate_mismatches.items())[:5],
        )
        print(
            f"\nexecutor {victim} (pid {pid}) killed mid-batch; caught up {recovered_s:.0f}s later; "
            f"{failed} failed task(s) retried; {len(groups)} groups agree; events {audit.summary()}; "
            f"test took {time.monotonic() - started:.0f}s"
        )
        assert mirror.stop() == 0, mirror.log_tail()
    finally:
        mirror.kill()
        cluster.cleanup()
