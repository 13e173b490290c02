"""`coordinator-mirror run` as a process of its own, read through its HTTP API -- and the audit of
what it produced against the coordinator and the log.

A SparkSession is per process, so a mirror on a Spark cluster (its own driver, its own executors)
runs beside the test or benchmark that drives it, not inside it.  `MirrorProcess` starts it, reads
``/ready``, ``/healthz``, ``/groups`` and Spark's own REST API (``spark.ui.port``), and stops it with
SIGTERM (the mirror stops between two micro-batches) or ``kill -9`` (the driver and its JVM).

The audit answers "did the mirror end where the coordinator is, and did it lose or repeat change
events": `commit_records` / `reference_events` read ``__consumer_offsets`` (a read_committed copy,
like the mirror reads) and fold it in one go with the pure fold, `read_events` reads the mirror's
JSON-lines event files, `audit_events` compares the two.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.proc import free_port as _free_port
from lab.proc import set_pdeathsig as _set_pdeathsig
from lab.spark_cluster import rss_bytes

COMMIT_RECORD_TYPES = frozenset({0, 1})


def http_get(url: str, timeout_s: float = 30.0) -> tuple[int, Any]:
    """(status, JSON body -- or its text when it is not JSON: Spark's UI answers "Spark is starting
    up" as text while its session starts)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            text = resp.read()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text.decode(errors="replace")
    except urllib.error.HTTPError as err:
        body = err.read()
        try:
            return err.code, json.loads(body)
        except ValueError:
            return err.code, body.decode(errors="replace")


class MirrorProcess:
    """``coordinator-mirror run`` in a child process (its driver JVM is its child in turn)."""

    def __init__(
        self,
        workdir: str | Path,
        *,
        bootstrap: str,
        spark_master: str = "local[2]",
        settings: Mapping[str, Any] | None = None,
        spark_conf: Mapping[str, str] | None = None,
        spark_ui: bool = True,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.bootstrap = bootstrap
        self.spark_master = spark_master
        self.http_port = _free_port()
        self.ui_port = _free_port() if spark_ui else 0
        self.settings = {
            "checkpoint_location": str(self.workdir / "checkpoint"),
            "events_path": str(self.workdir / "events"),
            "trigger_interval_s": 1.0,
            "shuffle_partitions": 2,
            "cluster_name": "lab",
            **(settings or {}),
        }
        conf = {
            # loopback only: the driver's RPC and block manager, and the executors' callbacks
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.showConsoleProgress": "false",  # no progress bars in the log file
        }
        if spark_ui:
            conf |= {"spark.ui.enabled": "true", "spark.ui.port": str(self.ui_port)}
        self.spark_conf = conf | dict(spark_conf or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "mirror.log"
        self.starts = 0

    # -- lifecycle -------------------------------------------------------------------------------
    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "streaming.app.cli", "run", "--bootstrap-servers", self.bootstrap]
        cmd += ["--spark-master", self.spark_master, "--http-port", str(self.http_port)]
        for name, value in self.settings.items():
            cmd += ["--" + name.replace("_", "-"), str(value)]
        for key, value in self.spark_conf.items():
            cmd += ["--spark-conf", f"{key}={value}"]
        return cmd

    def start(self) -> MirrorProcess:
        if self.process is not None and self.process.poll() is None:
            return self
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== start {self.starts} at {time.strftime('%H:%M:%S')}\n".encode())
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # its own group: kill() reaches the driver JVM too
                preexec_fn=_set_pdeathsig,  # noqa: PLW1509 - only async-signal-safe prctl
            )
        self.starts += 1
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "".join(self.log_path.read_text(errors="replace").splitlines(keepends=True)[-lines:])

    def _check_alive(self) -> None:
        if not self.alive():
            code = None if self.process is None else self.process.returncode
            raise RuntimeError(f"the mirror process exited ({code}); log tail:\n{self.log_tail()}")

    def get(self, path: str, timeout_s: float = 30.0) -> tuple[int, Any]:
        return http_get(self.url + path, timeout_s)

    def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        """Until ``GET /ready`` answers 200 (caught up with the end offsets seen at its start)."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(OSError):
                status, last = self.get("/ready", 5)
                if status == 200:
                    return dict(last)
            time.sleep(0.5)
        raise TimeoutError(f"mirror not ready after {timeout_s}s: {last}\n{self.log_tail()}")

    def last_batch(self) -> int:
        status, body = self.get("/healthz", 10)
        if status != 200:
            raise RuntimeError(f"mirror unhealthy: {body}")
        return int(body.get("last_batch", -1))

    def wait_batches(self, n: int, timeout_s: float) -> int:
        """Until ``n`` more micro-batches completed; returns the last batch id."""
        target = self.last_batch() + n
        deadline = time.monotonic() + timeout_s
        seen, since = target - n, time.monotonic()
        while (last := self.last_batch()) < target:
            self._check_alive()
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"no batch {target} within {timeout_s}s (at {last})")
            if last != seen:
                seen, since = last, now
            elif now - since > 2 * float(self.settings["trigger_interval_s"]) + 1:
                # a query that runs no micro-batch without new data: woken as the mirror's own
                # expiry wake does (`Mirror.wait_batches` in process)
                self._wake()
                since = now
            time.sleep(0.3)
        return last

    def _wake(self) -> None:
        wake_local_checkpoint(Path(str(self.settings["checkpoint_location"]).removeprefix("file:")))

    def groups(self) -> dict[str, dict[str, Any]]:
        status, body = self.get("/groups", 60)
        if status != 200:
            raise RuntimeError(f"GET /groups: {status} {body}")
        return {g["group_id"]: g for g in body["groups"]}

    def group(self, group_id: str) -> tuple[int, Any]:
        return self.get("/groups/" + urllib.parse.quote(group_id, safe=""))

    def stop(self, timeout_s: float = 120.0) -> int | None:
        """SIGTERM: the mirror stops between two micro-batches, then its Spark session."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reap_group()
        return proc.returncode

    def kill(self) -> None:
        """``kill -9`` of the driver process and its JVM (the whole process group)."""
        proc = self.process
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        self._reap_group()

    def _reap_group(self) -> None:
        # the driver JVM is in the process group; make sure nothing of it outlives the mirror
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    # -- processes ------------------------------------------------------------------------------
    def pids(self) -> dict[str, int]:
        """``{"driver": python pid, "driver_jvm": its JVM's pid}`` (absent once gone)."""
        if not self.alive():
            return {}
        assert self.process is not None
        out = {"driver": self.process.pid}
        for child in _children(self.process.pid):
            try:
                cmd = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"java" in cmd:
                out["driver_jvm"] = child
        return out

    def rss(self) -> dict[str, int]:
        return {name: rss_bytes(pid) for name, pid in self.pids().items()}

    # -- Spark's REST API (spark.ui.port) -------------------------------------------------------
    def spark_api(self, path: str) -> Any:
        status, body = http_get(f"http://127.0.0.1:{self.ui_port}/api/v1{path}", 30)
        if status != 200 or isinstance(body, str):  # not up yet: "Spark is starting up"
            raise RuntimeError(f"Spark REST {path}: {status} {body}")
        return body

    def app_id(self) -> str:
        apps = self.spark_api("/applications")
        return str(apps[0]["id"])

    def executors(self, all_: bool = False) -> list[dict[str, Any]]:
        app = self.app_id()
        return list(self.spark_api(f"/applications/{app}/{'allexecutors' if all_ else 'executors'}"))


def _children(pid: int) -> list[int]:
    out: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    kids = [int(c) for c in fh.read().split()]
                out += kids
                stack += kids
        except OSError:
            continue
    return out


# ---------------------------------------------------------------------------------------- the audit
def read_log(bootstrap: str) -> dict[str, list[Any]]:
    """``__consumer_offsets`` (read_committed, up to its end now), decoded, by group, in log order."""
    from decoders import Record, Source, decode_record
    from streaming.app.capture_cmd import iter_topic

    by: dict[str, list[Any]] = collections.defaultdict(list)
    for c in iter_topic(bootstrap, timeout_s=60):
        r = decode_record(c.key, c.value, Source(c.partition, c.offset, c.timestamp_ms))
        if isinstance(r, Record):
            by[r.key.group_id].append(r)
    for recs in by.values():
        recs.sort(key=lambda r: (r.source.partition, r.source.offset))
    return by


def commit_records(log: Mapping[str, Sequence[Any]]) -> dict[str, int]:
    """Offset-commit records (not tombstones) per group: what the mirror's ``offsets_committed``
    events must add up to, however the log was cut into micro-batches."""
    return {
        gid: n
        for gid, recs in log.items()
        if (n := sum(1 for r in recs if r.record_type in COMMIT_RECORD_TYPES and r.value is not None))
    }


def event_id(body: Mapping[str, Any]) -> str:
    """An event's documented identity (`state.events.event_key`: what a consumer of the events topic
    deduplicates by) as text.  Distinct events sharing one are a collision: `EventAudit.clean` fails
    on any."""
    from state.events import event_key

    return repr(event_key(body))


def canonical(body: Mapping[str, Any]) -> str:
    """An event's identity for the audit: its whole JSON, keys sorted."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _is_aggregate(event_type: str) -> bool:
    from state.events import EVENT_TYPES

    cls = EVENT_TYPES.get(event_type)
    return bool(cls is not None and cls.AGGREGATE)


def reference_events(
    log: Mapping[str, Sequence[Any]],
) -> tuple[collections.Counter[str], dict[tuple[str, str], int]]:
    """What one uninterrupted fold of the whole log emits: its discrete, log-positioned events
    (canonical JSON, with multiplicity), and per (group, type) the summed ``count`` of its
    positioned aggregate events (``offsets_committed``, ``offsets_deleted``, broker-confirmed
    ``offsets_expired``).  Both are independent of micro-batch boundaries; the aggregate events
    themselves are not (one per fold call), and neither are the events of the mirror's own clock
    (no log position)."""
    from state.replay import fold

    discrete: collections.Counter[str] = collections.Counter()
    counts: dict[tuple[str, str], int] = collections.defaultdict(int)
    for recs in log.values():
        for ev in fold(None, list(recs)).events:
            body = ev.to_json()
            if ev.source_offset is None:
                continue
            if ev.AGGREGATE:
                counts[(ev.group_id, ev.TYPE)] += int(body.get("count") or 0)
            else:
                discrete[canonical(body)] += 1
    return discrete, dict(counts)


def read_events(events_dir: Path) -> list[dict[str, Any]]:
    """Every event the mirror wrote (``events-<batch>.jsonl``, one file per micro-batch)."""
    out = []
    for path in sorted(events_dir.glob("events-*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


@dataclass
class EventAudit:
    events: int = 0
    discrete_expected: int = 0
    #: canonical JSON of discrete events the reference has and the mirror does not (or fewer times)
    discrete_lost: list[str] = field(default_factory=list)
    #: ... the mirror has and the reference does not
    discrete_unexpected: list[str] = field(default_factory=list)
    #: ... the mirror has more often than the reference (a replayed batch writing twice)
    duplicated: list[str] = field(default_factory=list)
    #: offset-commit records in the log / what the mirror's offsets_committed events count
    commits_expected: int = 0
    commits_counted: int = 0
    #: (group, aggregate type) whose summed counts differ from the reference: (expected, got)
    aggregate_mismatches: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    #: distinct events sharing one identity (`event_id`)
    id_collisions: int = 0

    @property
    def clean(self) -> bool:
        return not (
            self.discrete_lost
            or self.discrete_unexpected
            or self.duplicated
            or self.aggregate_mismatches
            or self.commits_expected != self.commits_counted
            or self.id_collisions
        )

    def summary(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "discrete_expected": self.discrete_expected,
            "discrete_lost": len(self.discrete_lost),
            "discrete_unexpected": len(self.discrete_unexpected),
            "duplicated": len(self.duplicated),
            "commits_expected": self.commits_expected,
            "commits_counted": self.commits_counted,
            "aggregate_mismatches": len(self.aggregate_mismatches),
            "event_id_collisions": self.id_collisions,
        }


def audit_events(
    events: Iterable[Mapping[str, Any]], log: Mapping[str, Sequence[Any]], groups: Iterable[str] | None = None
) -> EventAudit:
    """The mirror's events against one uninterrupted fold of the log (only ``groups``, if given):
    discrete events lost, unexpected or repeated; aggregate counts per group and type; and the
    ``offsets_committed`` counts against the commit records counted in the log itself."""
    wanted = set(groups) if groups is not None else None
    sub = {g: r for g, r in log.items() if wanted is None or g in wanted}
    expected, expected_counts = reference_events(sub)
    got: collections.Counter[str] = collections.Counter()
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    ids: dict[str, set[str]] = collections.defaultdict(set)
    audit = EventAudit()
    for ev in events:
        gid = str(ev["group_id"])
        if wanted is not None and gid not in wanted:
            continue
        audit.events += 1
        if ev.get("source_offset") is None:
            continue  # the mirror's own clock (expiry): no log position to compare
        if _is_aggregate(str(ev.get("type"))):
            counts[(gid, str(ev.get("type")))] += int(ev.get("count") or 0)
        else:
            body = canonical(ev)
            got[body] += 1
            ids[event_id(ev)].add(body)
    audit.discrete_expected = sum(expected.values())
    audit.discrete_lost = sorted((expected - got).elements())
    audit.discrete_unexpected = sorted(b for b in got if b not in expected)
    audit.duplicated = sorted(b for b, n in got.items() if b in expected and n > expected[b])
    audit.id_collisions = sum(len(bodies) - 1 for bodies in ids.values())
    audit.aggregate_mismatches = {
        k: (expected_counts.get(k, 0), counts.get(k, 0))
        for k in expected_counts.keys() | counts.keys()
        if expected_counts.get(k, 0) != counts.get(k, 0)
    }
    audit.commits_expected = sum(commit_records(sub).values())
    audit.commits_counted = sum(n for (_g, t), n in counts.items() if t == "offsets_committed")
    return audit


# ------------------------------------------------------------------------------------ agreement
def offsets_of(snapshot: Mapping[str, Any]) -> dict[tuple[str, int], int]:
    return {(o["topic"], int(o["partition"])): int(o["offset"]) for o in snapshot.get("offsets", [])}


def compare_group(view: Any, status: int, snapshot: Any) -> str | None:
    """One group: the coordinator's view (`lab.probe.GroupView`) against ``GET /groups/{id}``.
    ``None`` when they agree, else what differs."""
    gone = not view.exists or (view.state == "Dead")
    if gone:
        return None if status == 404 else f"deleted in the coordinator, mirror has it ({status})"
    if status != 200:
        return f"mirror answers {status}: {snapshot}"
    if snapshot.get("type") != view.type or snapshot.get("state") != view.state:
        return f"type/state {snapshot.get('type')}/{snapshot.get('state')} != {view.type}/{view.state}"
    mine = offsets_of(snapshot)
    theirs = {tp: o.offset for tp, o in view.offsets.items()}
    if mine != theirs:
        diff = {
            tp: (mine.get(tp), theirs.get(tp))
            for tp in mine.keys() | theirs.keys()
            if mine.get(tp) != theirs.get(tp)
        }
        return f"offsets differ (mirror, coordinator): {dict(list(diff.items())[:5])}"
    members = {m["member_id"] for m in snapshot.get("members", [])}
    if members != {m.member_id for m in view.members}:
        return f"members {sorted(members)} != {sorted(m.member_id for m in view.members)}"
    return None


def wake_local_checkpoint(checkpoint: Path) -> bool:
    """An empty file in a local checkpoint's side input (`streaming.pipeline.backfill.write_wake`),
    as the mirror's own expiry wake writes one: its query, which runs no micro-batch without new
    data, runs one.  False when the checkpoint has no side input (a query planned with ticks)."""
    from streaming.pipeline.backfill import wake_file

    folder = checkpoint / "seed"
    if not folder.is_dir():
        return False
    name, data = wake_file(int(time.time() * 1000))
    (folder / f".{name}.tmp").write_bytes(data)
    (folder / f".{name}.tmp").rename(folder / name)
    return True
