"""Soak: the mirror on a Spark standalone cluster for ``--minutes`` of churning groups and faults.

    .venv/bin/python -m bench.soak [--minutes 30] [--groups 1000] [--commit-rate 20]
                                   [--fault-every 180] [--faults broker,mirror,executor]

What runs (all on loopback, all real):

* a local Kafka broker (`lab.broker.LocalKafka`, 10 partitions of ``__consumer_offsets``);
* a Spark standalone cluster, one master and two workers of one core (`lab.spark_cluster`);
* the mirror as ``coordinator-mirror run --spark-master spark://...`` in its own process
  (`lab.mirror_process.MirrorProcess`), change events to files;
* the churn: ``--groups`` offset-only groups committing through real OffsetCommit requests
  (AdminClient ``alter_consumer_group_offsets``, 4 partitions each, ``--commit-rate`` requests/s in
  all -- 1k groups each committing every ~50 s at the default), a few of them deleted every minute
  (DeleteGroups) and re-created by their next commit, and ``--members`` real members (classic and
  KIP-848 consumer protocol) joining, committing and leaving ``--member-groups`` groups;
* a fault every ``--fault-every`` seconds, in turn: broker restart (controlled stop, start on the
  same data directory and ports), ``kill -9`` of the mirror's driver (process and JVM) and restart
  on the same checkpoint, ``kill -9`` of an executor JVM (busy with a task when one is).

A supervisor restarts the mirror whenever it exits on its own (as Kubernetes would) and counts it.

At the end (churn stopped, members gone): the coordinator's group list and every group's committed
offsets (AdminClient: ``list_consumer_groups`` + GroupProbe) against the mirror's ``/groups`` and
``/groups/{id}``; the change events against one uninterrupted fold of the whole log (discrete
events lost / unexpected / repeated, ``offsets_committed`` counts against commit records); the
resident memory of the driver (Python and JVM), the executors, the broker, over time.  Figures are
printed; nothing is asserted (benchmarks report, tests decide).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

T0 = time.monotonic()
PARTITIONS = 4
TOPICS = 10


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} +{time.monotonic() - T0:6.0f}s] {msg}", flush=True)


# ------------------------------------------------------------------------------------------- broker
def restart_broker(broker: Any) -> float:
    """Controlled stop, then the same ``server.properties`` on the same data directory again."""
    import subprocess

    from lab.broker import LocalKafka
    from lab.proc import set_pdeathsig as _set_pdeathsig

    started = time.monotonic()
    broker.stop()
    if hasattr(LocalKafka, "restart"):  # the lab's own, where it has one
        broker.restart()
    else:
        with open(broker.log_path, "ab") as out:
            broker.process = subprocess.Popen(
                broker._java(
                    "kafka.Kafka",
                    str(broker.workdir / "server.properties"),
                    log4j=broker.workdir / "log4j2.properties",
                    heap=broker.settings.heap,
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_set_pdeathsig,  # noqa: PLW1509 - only async-signal-safe prctl
            )
        broker._wait_ready(120)
    return time.monotonic() - started


# -------------------------------------------------------------------------------------------- churn
class Churn:
    """Commits, deletions and members, each in a thread, until ``stop``."""

    def __init__(self, bootstrap: str, lab: Any, topics: list[str], args: argparse.Namespace) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.lab = lab
        self.topics = topics
        self.args = args
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        self.groups = [f"soak-g{i:04d}" for i in range(args.groups)]
        self.member_groups = [f"soak-m{i:02d}" for i in range(args.member_groups)]
        self.next_offset: dict[str, int] = {}
        self.counts = {
            "commit_requests": 0,
            "commit_failed": 0,
            "deleted": 0,
            "delete_failed": 0,
            "joined": 0,
            "left": 0,
            "member_commits": 0,
            "member_errors": 0,
        }
        self.members: list[Any] = []
        self.stop = threading.Event()
        #: cleared while the broker restarts: librdkafka 2.16's AdminClient aborted the process
        #: (rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0' failed) when its
        #: pending requests timed out against a broker that was down
        self.admin_allowed = threading.Event()
        self.admin_allowed.set()
        self.threads = [
            threading.Thread(target=self._commits, name="commits", daemon=True),
            threading.Thread(target=self._deletes, name="deletes", daemon=True),
            threading.Thread(target=self._members, name="members", daemon=True),
        ]

    def start(self) -> Churn:
        for t in self.threads:
            t.start()
        return self

    def _commits(self) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        pending: list[Any] = []
        interval = 1.0 / self.args.commit_rate
        next_at = time.monotonic()
        for i in itertools.count():
            if self.stop.is_set():
                break
            if not self.admin_allowed.is_set():
                self._settle(pending)
                self.admin_allowed.wait()
                next_at = time.monotonic()
            g = self.groups[i % len(self.groups)]
            topic = self.topics[i % len(self.topics)]
            base = self.next_offset.get(g, 0) + random.randint(1, 50)
            self.next_offset[g] = base
            tps = [TopicPartition(topic, p, base + p) for p in range(PARTITIONS)]
            try:
                req = ConsumerGroupTopicPartitions(g, tps)
                pending += self.admin.alter_consumer_group_offsets([req], request_timeout=30).values()
            except Exception:
                self.counts["commit_failed"] += 1
            self.counts["commit_requests"] += 1
            if len(pending) >= 200:
                self._settle(pending)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -5:  # fell behind (a fault): do not burst to catch up
                next_at = time.monotonic()
        self._settle(pending)

    def _settle(self, pending: list[Any]) -> None:
        for fut in pending:
            try:
                fut.result(60)
            except Exception:  # the broker restarting: the coordinator simply has no such commit
                self.counts["commit_failed"] += 1
        pending.clear()

    def _deletes(self) -> None:
        while not self.stop.wait(60.0 / max(self.args.deletes_per_minute, 1e-9)):
            if not self.admin_allowed.is_set():
                continue
            g = random.choice(self.groups)
            try:
                for fut in self.admin.delete_consumer_groups([g], request_timeout=30).values():
                    fut.result(60)
                self.counts["deleted"] += 1
            except Exception:  # e.g. the group has no offsets yet (GROUP_ID_NOT_FOUND)
                self.counts["delete_failed"] += 1

    def _members(self) -> None:
        protocols = itertools.cycle(["classic", "consumer"])
        while not self.stop.wait(self.args.member_every):
            try:
                self.members = [m for m in self.members if m.alive]
                if len(self.members) < self.args.members and (not self.members or random.random() < 0.6):
                    g = random.choice(self.member_groups)
                    topic = self.topics[hash(g) % len(self.topics)]
                    self.members.append(self.lab.member(g, [topic], protocol=next(protocols)))
                    self.counts["joined"] += 1
                elif self.members:
                    m = self.members.pop(random.randrange(len(self.members)))
                    with contextlib.suppress(Exception):
                        m.commit()
                        self.counts["member_commits"] += 1
                    m.close()
                    self.counts["left"] += 1
                for m in random.sample(self.members, min(2, len(self.members))):
                    m.commit()
                    self.counts["member_commits"] += 1
            except Exception as exc:
                self.counts["member_errors"] += 1
                log(f"member churn: {type(exc).__name__}: {str(exc)[:200]}")

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(120)
        for m in self.members:
            with contextlib.suppress(Exception):
                m.close()
                self.counts["left"] += 1
        self.members = []


# ------------------------------------------------------------------------------------------- memory
class Sampler:
    """RSS of every process that matters, every ``every`` seconds, from /proc."""

    def __init__(self, broker: Any, cluster: Any, mirror: Any, every: float) -> None:
        self.broker, self.cluster, self.mirror, self.every = broker, cluster, mirror, every
        self.rows: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _run(self) -> None:
        from lab.spark_cluster import rss_bytes

        while not self.stop.wait(self.every):
            row: dict[str, Any] = {"t": round(time.monotonic() - T0)}
            for name, value in self.mirror.rss().items():
                row[name] = value
            executors = self.cluster.executor_pids()
            row["executors"] = sum(rss_bytes(p) for p in executors.values())
            row["executor_count"] = len(executors)
            if self.broker.process is not None:
                row["broker"] = rss_bytes(self.broker.process.pid)
            daemons = self.cluster.daemon_pids()
            row["spark_daemons"] = sum(rss_bytes(p) for p in daemons.values())
            with contextlib.suppress(Exception):
                row["batch"] = self.mirror.last_batch()
            self.rows.append(row)

    def start(self) -> Sampler:
        self.thread.start()
        return self


def memory_report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per process kind: MiB at each quarter of the run, and the growth from the 2nd quarter (after
    warm-up) to the last."""
    kinds = ["driver", "driver_jvm", "executors", "broker", "spark_daemons"]
    out: dict[str, Any] = {}
    n = len(rows)
    if n < 8:
        return {"samples": n}
    quarters = [rows[i * n // 4 : (i + 1) * n // 4] for i in range(4)]
    for kind in kinds:
        means = []
        for q in quarters:
            vals = [r[kind] for r in q if r.get(kind)]
            means.append(round(statistics.mean(vals) / 2**20) if vals else None)
        peak = max((r.get(kind) or 0) for r in rows)
        growth = None
        if means[1] and means[3]:
            growth = round(100 * (means[3] - means[1]) / means[1], 1)
        out[kind] = {"quarters_mib": means, "peak_mib": round(peak / 2**20), "growth_q2_to_q4_pct": growth}
    out["samples"] = n
    return out


# -------------------------------------------------------------------------------------------- faults
def fault_executor(cluster: Any, mirror: Any, wait_s: float = 30.0) -> str:
    deadline = time.monotonic() + wait_s
    app = None
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # Spark's REST API is slow under load: ask again
            app = app or mirror.app_id()
            busy = [e for e in mirror.executors() if e["id"] != "driver" and e["activeTasks"] > 0]
            pids = cluster.executor_pids(app)
            for e in busy:
                if str(e["id"]) in pids:
                    pid = cluster.kill_executor(str(e["id"]), app)
                    return f"executor {e['id']} (pid {pid}) killed while running a task"
        time.sleep(0.1)
    if app is None:  # the master knows the running application too
        app = next((a["id"] for a in cluster.state().get("activeapps", [])), None)
    pids = cluster.executor_pids(app)
    if not pids:
        return "no executor to kill"
    victim = sorted(pids)[0]
    pid = cluster.kill_executor(victim, app)
    return f"executor {victim} (pid {pid}) killed between tasks (none busy within {wait_s:.0f}s)"


def recovered(mirror: Any, timeout_s: float = 600.0) -> float | None:
    """Seconds until the mirror is ready and completes a new micro-batch (None: not in time)."""
    started = time.monotonic()
    try:
        mirror.wait_ready(timeout_s)
        mirror.wait_batches(1, timeout_s)
    except (TimeoutError, RuntimeError) as exc:
        log(f"  not recovered: {str(exc)[:300]}")
        return None
    return time.monotonic() - started


# -------------------------------------------------------------------------------------------- audit
def final_agreement(bootstrap: str, lab: Any, mirror: Any) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient

    from lab.mirror_process import compare_group

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    listing = admin.list_consumer_groups(request_timeout=60).result(120)
    coordinator = {g.group_id for g in listing.valid}
    ids = sorted(coordinator)
    views: dict[str, Any] = {}
    for i in range(0, len(ids), 250):
        views.update(lab.describe(*ids[i : i + 250]))
    mirror.wait_batches(2, 600)  # every record written before the read-back is folded
    listed = set(mirror.groups())
    # the coordinator lists groups it holds in memory that no record describes (none expected
    # here); the mirror must list every group whose records exist
    disagreements: dict[str, str] = {}
    for gid in sorted(coordinator | listed):
        view = views.get(gid)
        status, snap = mirror.group(gid)
        if view is None:
            views.update(lab.describe(gid))
            view = views[gid]
        problem = compare_group(view, status, snap)
        if problem:
            disagreements[gid] = problem
    offsets = sum(len(v.offsets) for v in views.values())
    return {
        "coordinator_groups": len(coordinator),
        "mirror_groups": len(listed),
        "only_in_coordinator": sorted(coordinator - listed)[:10],
        "only_in_mirror": sorted(listed - coordinator)[:10],
        "committed_offsets_compared": offsets,
        "groups_disagreeing": len(disagreements),
        "examples": dict(list(disagreements.items())[:5]),
    }


# --------------------------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0, help="churn duration (default 30)")
    ap.add_argument("--groups", type=int, default=1000, help="offset-committing groups")
    ap.add_argument("--commit-rate", type=float, default=20.0, help="OffsetCommit requests/s in all")
    ap.add_argument("--deletes-per-minute", type=float, default=3.0)
    ap.add_argument("--members", type=int, default=6, help="live members at most")
    ap.add_argument("--member-groups", type=int, default=20)
    ap.add_argument("--member-every", type=float, default=5.0, help="seconds between member join/leave")
    ap.add_argument("--fault-every", type=float, default=180.0, help="seconds between faults")
    ap.add_argument("--faults", default="broker,mirror,executor", help="the fault cycle")
    ap.add_argument("--trigger", type=float, default=2.0, help="mirror trigger interval, seconds")
    ap.add_argument("--offsets-partitions", type=int, default=10)
    ap.add_argument("--sample-every", type=float, default=10.0, help="RSS sampling period, seconds")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = set(faults) - {"broker", "mirror", "executor"}
    if unknown:
        ap.error(f"--faults: unknown {sorted(unknown)} (broker, mirror, executor)")

    from lab.broker import BrokerSettings, LocalKafka
    from lab.lab import Lab
    from lab.mirror_process import MirrorProcess, audit_events, read_events, read_log
    from lab.spark_cluster import StandaloneCluster

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="cm-soak-"))
    log(f"workdir {workdir}")
    broker = LocalKafka(
        BrokerSettings(offsets_topic_num_partitions=args.offsets_partitions), workdir / "kafka"
    )
    cluster = StandaloneCluster(workdir=workdir / "spark")
    mirror: MirrorProcess | None = None
    churn: Churn | None = None
    sampler: Sampler | None = None
    lab: Lab | None = None
    figures: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    try:
        broker.start()
        lab = Lab(broker.bootstrap, run_id="soak")
        topics = [
            lab.topic(f"soak-t{i}", partitions=PARTITIONS, messages_per_partition=50) for i in range(TOPICS)
        ]
        cluster.start()
        log(f"broker {broker.bootstrap}, Spark {cluster.master_url}")
        mirror = MirrorProcess(
            workdir / "mirror",
            bootstrap=broker.bootstrap,
            spark_master=cluster.master_url,
            settings={"trigger_interval_s": args.trigger, "cluster_name": "soak"},
            spark_conf={"spark.cores.max": "2", "spark.executor.cores": "1", "spark.executor.memory": "768m"},
        ).start()
        mirror.wait_ready(600)
        log(f"mirror ready at {mirror.url} (Spark UI port {mirror.ui_port})")

        churn = Churn(broker.bootstrap, lab, topics, args).start()
        sampler = Sampler(broker, cluster, mirror, args.sample_every).start()
        end = time.monotonic() + args.minutes * 60
        next_fault = time.monotonic() + args.fault_every
        fault_cycle = itertools.cycle(faults)
        fault_log: list[dict[str, Any]] = []
        unplanned_restarts = 0
        last_status = 0.0
        while time.monotonic() < end:
            time.sleep(1.0)
            if not mirror.alive():  # a supervisor's job: restart what exited on its own
                unplanned_restarts += 1
                log(
                    f"mirror exited on its own ({mirror.process.returncode if mirror.process else '?'}): "
                    f"{mirror.log_tail(5)!r}; restarting"
                )
                mirror.stop()
                mirror.start()
                continue
            if faults and time.monotonic() >= next_fault:
                kind = next(fault_cycle)
                at = round(time.monotonic() - T0)
                if kind == "broker":
                    churn.admin_allowed.clear()
                    time.sleep(2.0)  # the admin requests in flight settle before the broker goes
                    try:
                        down = restart_broker(broker)
                    finally:
                        churn.admin_allowed.set()
                    what = f"broker restarted on its data directory ({down:.1f}s down)"
                elif kind == "mirror":
                    mirror.kill()
                    mirror.start()
                    what = "mirror driver killed (-9) and restarted on its checkpoint"
                else:
                    try:
                        what = fault_executor(cluster, mirror)
                    except Exception as exc:  # report and go on: the soak is about the mirror
                        what = f"executor fault failed: {type(exc).__name__}: {exc}"
                log(f"FAULT {kind}: {what}")
                took = recovered(mirror)
                log(f"  recovered in {took:.0f}s" if took is not None else "  NOT recovered")
                fault_log.append({"t": at, "fault": kind, "what": what, "recovered_s": took and round(took)})
                next_fault = time.monotonic() + args.fault_every
            if time.monotonic() - last_status > 60:
                last_status = time.monotonic()
                rss = mirror.rss()
                log(
                    f"status: {churn.counts} batch={sampler.rows[-1].get('batch') if sampler.rows else '?'} "
                    f"driver={rss.get('driver', 0) >> 20}MiB driver_jvm={rss.get('driver_jvm', 0) >> 20}MiB"
                )
        log("churn stopping; members leave")
        churn.finish()
        sampler.stop.set()
        time.sleep(5)
        if not mirror.alive():
            unplanned_restarts += 1
            mirror.stop()
            mirror.start()
        mirror.wait_ready(600)
        log("final agreement with the coordinator (AdminClient) ...")
        agreement = final_agreement(broker.bootstrap, lab, mirror)
        log("events against one uninterrupted fold of the log ...")
        the_log = read_log(broker.bootstrap)
        audit = audit_events(read_events(workdir / "mirror" / "events"), the_log)
        figures.update(
            {
                "minutes": args.minutes,
                "log_records": sum(len(r) for r in the_log.values()),
                "churn": churn.counts,
                "faults": fault_log,
                "unplanned_mirror_restarts": unplanned_restarts,
                "mirror_starts": mirror.starts,
                "agreement": agreement,
                "events": audit.summary(),
                "events_examples": {
                    "lost": audit.discrete_lost[:5],
                    "unexpected": audit.discrete_unexpected[:5],
                    "duplicated": audit.duplicated[:5],
                    "aggregate_mismatches": {
                        f"{g}/{t}": v for (g, t), v in list(audit.aggregate_mismatches.items())[:5]
                    },
                },
                "memory": memory_report(sampler.rows),
            }
        )
        print("\n==== soak figures")
        print(json.dumps(figures, indent=2, default=str))
        print("\n==== RSS over time (MiB)")
        print(
            f"{'t(s)':>6} {'batch':>6} {'driver':>7} {'drv_jvm':>8} {'execs':>6} {'n':>2} "
            f"{'broker':>7} {'daemons':>8}"
        )
        step = max(1, len(sampler.rows) // 30)
        for r in sampler.rows[::step]:
            print(
                f"{r['t']:>6} {r.get('batch', ''):>6} {r.get('driver', 0) >> 20:>7} "
                f"{r.get('driver_jvm', 0) >> 20:>8} {r.get('executors', 0) >> 20:>6} "
                f"{r.get('executor_count', 0):>2} {r.get('broker', 0) >> 20:>7} "
                f"{r.get('spark_daemons', 0) >> 20:>8}"
            )
        if args.json:
            args.json.write_text(json.dumps({**figures, "rss_rows": sampler.rows}, indent=2, default=str))
        return 0
    finally:
        if churn is not None:
            churn.finish()
        if sampler is not None:
            sampler.stop.set()
        if mirror is not None:
            mirror.stop(60)
        if lab is not None:
            lab.close()
        cluster.cleanup()
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
