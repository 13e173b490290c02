"""Readiness side by side: the mirror, the floor, Burrow and kminion started fresh on the same records.

    .venv/bin/python -m bench.readiness [--quick] [--records 1000000] [--groups 10000]
        [--partitions 50] [--runs 3] [--before DIR] [--variant NAME:VAR=VALUE] [--bootstrap HOST:PORT]
        [--workdir DIR]
    BURROW_BIN=/path/to/burrow KMINION_BIN=/path/to/kminion .venv/bin/python -m bench.readiness

A local broker (the lab's real KRaft broker, 50 partitions of ``__consumer_offsets``) is preloaded
with ``--records`` offset commits (`lab.preload`: ``--groups`` groups x ``--partitions`` partitions
x as many rounds as it takes -- 10k x 50 x 2 = 1 M by default).  Then each tool is started as a
process of its own, fresh (a new checkpoint for the mirror), once per run, the tools alternated,
``--runs`` runs; printed per tool: the median of

* **start -> ready**: from the process's start to

  - the mirror (``coordinator-mirror run`` with its defaults): ``GET /ready`` answers 200;
  - the floor: the process (a Python interpreter reading every record with confluent-kafka,
    `lab.preload.floor_read`) exits;
  - Burrow (``BURROW_BIN``, ``start-latest=false``, otherwise its defaults): every group's last
    commit is visible in its HTTP API -- polled on the group of the last record of every
    ``__consumer_offsets`` partition, then checked for every group (the time is when the last one
    was seen; the full check's own duration is not counted when every group already had it);
  - kminion (``KMINION_BIN``, ``scrapeMode: offsetsTopic``): its ``GET /ready`` (kminion checks
    its catch-up every 12 s + 3 s), and -- ``work done`` -- when its CPU time reached 95 % of its
    CPU time at ready;

* **CPU s to ready**: user + system time of the whole process tree (Python, JVMs, Spark's Python
  workers; reaped children included) at ready, from /proc -- and by process (``cpu_parts_s``: the driver,
  Spark's JVM, the client JVM, the Python workers);
* **peak RSS**: the largest sum of resident memory over the tree, sampled every 0.1 s from start
  to 5 s past ready (``--after-ready``); **peak PSS** the same with each process's proportional
  set size, which counts a page N processes share 1/N in each (Spark's Python workers are forked:
  a sum of RSS counts their shared pages once per worker).  For a one-process tool both are equal.

``--before DIR`` adds a second mirror, run from the source tree at ``DIR`` (e.g. ``git worktree add
/tmp/before main``, or ``git archive main | tar -x -C DIR``) with this tree's jars: before/after in
one run, alternated with the rest.  Figures are printed (a table, then JSON); nothing is asserted.
The machine is shared: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.burrow_side_by_side import burrow_toml
from lab.preload import expected_offset, group_name, last_group_per_partition, preload, rounds_for, topic_name
from lab.proc import TreeSampler, free_port
from streaming.jars import jars_root

AFTER_READY_S = 5.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _get(url: str, timeout_s: float = 5.0) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            status, body = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, body = err.code, err.read()
    except OSError:
        return 0, None
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


class Layout:
    """What the preload wrote, for the readiness checks of the tools that expose offsets."""

    def __init__(self, args: argparse.Namespace, sentinels: dict[int, str]) -> None:
        self.groups = args.groups
        self.partitions = args.partitions
        self.topics = args.topics
        self.last_round = rounds_for(args.records, args.groups, args.partitions) - 1
        self.sentinels = sorted(set(sentinels.values()))


# ------------------------------------------------------------------------------------------- tools
class Tool:
    name = ""

    def command(self, run: int) -> tuple[list[str], dict[str, str], Path]:
        raise NotImplementedError

    def ready(self, proc: subprocess.Popen[bytes]) -> bool:
        raise NotImplementedError

    def finish(self) -> float | None:
        """An adjusted ready time (monotonic), if the check knows it better than the poll's."""
        return None


class MirrorTool(Tool):
    def __init__(
        self, name: str, bootstrap: str, workdir: Path, source: Path | None, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.source = source
        self.env = env or {}
        self.port = 0

    def command(self, run: int) -> tuple[list[str], dict[str, str], Path]:
        self.port = free_port()
        wd = self.workdir / f"{self.name}-{run}"
        wd.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "streaming.app.cli", "run", "--bootstrap-servers", self.bootstrap]
        cmd += ["--checkpoint-location", str(wd / "checkpoint"), "--http-port", str(self.port)]
        cmd += ["--http-host", "127.0.0.1", "--log-level", "INFO"]
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", COORDINATOR_MIRROR_JARS=str(jars_root().resolve()))
        if self.source is not None:
            env["PYTHONPATH"] = str(self.source)
        env.update(self.env)
        return cmd, env, wd

    def ready(self, proc: subprocess.Popen[bytes]) -> bool:
        return _get(f"http://127.0.0.1:{self.port}/ready", 2)[0] == 200


class FloorTool(Tool):
    name = "floor"

    def __init__(self, bootstrap: str, workdir: Path, offsets_partitions: int) -> None:
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.offsets_partitions = offsets_partitions

    def command(self, run: int) -> tuple[list[str], dict[str, str], Path]:
        code = (
            "import sys, json; from lab.preload import floor_read; "
            "rows, s = floor_read(sys.argv[1], list(range(int(sys.argv[2])))); "
            "print(json.dumps({'records': rows, 'read_s': s}))"
        )
        wd = self.workdir / f"floor-{run}"
        wd.mkdir(parents=True, exist_ok=True)
        return (
            [sys.executable, "-c", code, self.bootstrap, str(self.offsets_partitions)],
            dict(os.environ),
            wd,
        )

    def ready(self, proc: subprocess.Popen[bytes]) -> bool:
        if proc.poll() is None:
            return False
        if proc.returncode != 0:
            raise RuntimeError(f"the floor read exited with {proc.returncode}")
        return True


class BurrowTool(Tool):
    name = "burrow"

    def __init__(self, binary: str, bootstrap: str, workdir: Path, layout: Layout) -> None:
        self.binary = binary
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.layout = layout
        self.port = 0
        self.pending: list[str] = []
        self.verified_at: float | None = None

    def command(self, run: int) -> tuple[list[str], dict[str, str], Path]:
        self.port = free_port()
        wd = self.workdir / f"burrow-{run}"
        wd.mkdir(parents=True, exist_ok=True)
        # Burrow's defaults but for reading the topic from its start (start-latest=false)
        (wd / "burrow.toml").write_text(burrow_toml(self.bootstrap, self.port, "burrow-readiness"))
        self.pending = list(self.layout.sentinels)
        self.verified_at = None
        return [self.binary, "--config-dir", str(wd)], dict(os.environ), wd

    def _complete(self, group: str) -> bool:
        url = f"http://127.0.0.1:{self.port}/v3/kafka/local/consumer/{urllib.parse.quote(group)}"
        status, body = _get(url, 10)
        if status != 200 or not isinstance(body, dict):
            return False
        g = int(group.rsplit("g", 1)[1])
        parts = (body.get("topics") or {}).get(topic_name(g, self.layout.topics)) or []
        if len(parts) < self.layout.partitions:
            return False
        for p, part in enumerate(parts[: self.layout.partitions]):
            offsets = [o for o in part.get("offsets") or [] if o]
            if not offsets or offsets[-1]["offset"] != expected_offset(self.layout.last_round, p):
                return False
        return True

    def ready(self, proc: subprocess.Popen[bytes]) -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"burrow exited with {proc.returncode}")
        while self.pending and self._complete(self.pending[0]):
            self.pending.pop(0)
        if self.pending:
            return False
        seen_at = time.monotonic()
        # every group, 4 at a time; any not complete yet is polled until it is
        groups = [group_name(g) for g in range(self.layout.groups)]
        with ThreadPoolExecutor(4) as pool:
            done = list(pool.map(self._complete, groups))
        late = [g for g, ok in zip(groups, done, strict=True) if not ok]
        if late:
            log(f"burrow: {len(late)} groups incomplete after the last records of every partition")
            for g in late:
                while not self._complete(g):
                    time.sleep(0.05)
            self.verified_at = time.monotonic()
        else:
            self.verified_at = seen_at
        return True

    def finish(self) -> float | None:
        return self.verified_at


class KminionTool(Tool):
    name = "kminion"

    def __init__(self, binary: str, bootstrap: str, workdir: Path) -> None:
        self.binary = binary
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.port = 0

    def command(self, run: int) -> tuple[list[str], dict[str, str], Path]:
        self.port = free_port()
        wd = self.workdir / f"kminion-{run}"
        wd.mkdir(parents=True, exist_ok=True)
        env = dict(
            os.environ,
            KAFKA_BROKERS=self.bootstrap,
            MINION_CONSUMERGROUPS_SCRAPEMODE="offsetsTopic",
            EXPORTER_HOST="127.0.0.1",
            EXPORTER_PORT=str(self.port),
            LOGGER_LEVEL="warn",
        )
        return [self.binary], env, wd

    def ready(self, proc: subprocess.Popen[bytes]) -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"kminion exited with {proc.returncode}")
        return _get(f"http://127.0.0.1:{self.port}/ready", 2)[0] == 200


# --------------------------------------------------------------------------------------------- run
def measure(tool: Tool, run: int, timeout_s: float, after_ready_s: float = AFTER_READY_S) -> dict[str, Any]:
    cmd, env, wd = tool.command(run)
    log_path = wd / "process.log"
    with open(log_path, "wb") as out:
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=wd,
            start_new_session=True,
        )
        sampler = TreeSampler(proc.pid, pss=True).start()
        try:
            ready_at = None
            while time.monotonic() - started < timeout_s:
                if tool.ready(proc):
                    ready_at = tool.finish() or time.monotonic()
                    break
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
            if ready_at is None:
                raise RuntimeError(f"{tool.name} never became ready; see {log_path}")
            if proc.poll() is None:
                cpu, _ = sampler.sample()
                cpu_parts = dict(sampler.cpu_parts)
                time.sleep(after_ready_s)
            else:  # the floor: exited and reaped, its CPU is in our children's rusage
                cpu = _reaped_cpu()
                cpu_parts = {"root": cpu}
        finally:
            sampler.stop()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    figures: dict[str, Any] = {
        "ready_s": round(ready_at - started, 2),
        "cpu_s": round(cpu, 1),
        "peak_rss_mb": round(sampler.peak_rss / 2**20),
        "peak_rss_parts_mb": {k: round(v / 2**20) for k, v in sorted(sampler.peak_parts.items())},
        "peak_pss_mb": round(sampler.peak_pss / 2**20),
        "peak_pss_parts_mb": {k: round(v / 2**20) for k, v in sorted(sampler.peak_pss_parts.items())},
        "cpu_parts_s": {k: round(v, 1) for k, v in sorted(cpu_parts.items()) if v},
    }
    if isinstance(tool, KminionTool):
        target = 0.95 * cpu
        done = next((t for t, c, _r in sampler.samples if c >= target), ready_at)
        figures["work_done_s"] = round(done - started, 2)
    if isinstance(tool, MirrorTool):
        figures["phases"] = _mirror_phases(log_path, started)
    return figures


def _reaped_cpu() -> float:
    """CPU of an exited child (the floor), from this process's children's rusage."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return float(usage.ru_utime + usage.ru_stime) - _reaped_cpu.before  # type: ignore[attr-defined]


_reaped_cpu.before = 0.0  # type: ignore[attr-defined]


def _mirror_phases(log_path: Path, started: float) -> dict[str, float]:
    """When the mirror logged its start-up steps (seconds since its start; the log's wall clock
    against ours)."""
    out: dict[str, float] = {}
    marks = {"records (log positions) to catch up with": "offsets_known", "query ": "query_started"}
    wall0 = time.time() - (time.monotonic() - started)
    for line in log_path.read_text(errors="replace").splitlines():
        for needle, name in marks.items():
            if needle in line and name not in out:
                with contextlib.suppress(ValueError, IndexError):
                    stamp = line.split()[0] + " " + line.split()[1]
                    t = time.mktime(time.strptime(stamp.split(",")[0].split(".")[0], "%Y-%m-%d %H:%M:%S"))
                    out[name] = round(t - time.timezone - wall0, 1)
    return out


def table(results: dict[str, list[dict[str, Any]]], floor_s: float | None) -> str:
    rows = [
        "| tool | start -> ready (s) | x floor | CPU s to ready | peak RSS (MB) | peak PSS (MB) | runs |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        if not runs:
            continue
        ready = statistics.median(r["ready_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        rss = statistics.median(r["peak_rss_mb"] for r in runs)
        pss = statistics.median(r["peak_pss_mb"] for r in runs)
        extra = ""
        if "work_done_s" in runs[0]:
            extra = f" (work done {statistics.median(r['work_done_s'] for r in runs):.1f})"
        ratio = f"{ready / floor_s:.2f}" if floor_s else ""
        spread = "/".join(f"{r['ready_s']:.1f}" for r in runs)
        rows.append(
            f"| {name} | {ready:.1f}{extra} | {ratio} | {cpu:.1f} | {rss:,.0f} | {pss:,.0f} | {spread} |"
        )
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--offsets-partitions", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="50k records: 1,000 groups x 25 partitions x 2")
    ap.add_argument("--before", type=Path, default=None, help="a source tree to run as the 'before' mirror")
    ap.add_argument(
        "--tools", nargs="+", default=None, help="only these (mirror, before, floor, burrow, kminion)"
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:VAR=VALUE[;VAR=VALUE]",
        help="one more mirror, run with these environment variables set (e.g. "
        '\'heap:COORDINATOR_MIRROR_SPARK_CONF={"spark.driver.memory":"768m"}\'); repeatable',
    )
    ap.add_argument("--bootstrap", default=None, help="an already preloaded broker (skips the preload)")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument(
        "--after-ready",
        type=float,
        default=AFTER_READY_S,
        help="peak RSS sampled until this long past ready (s)",
    )
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    if args.quick:
        args.records, args.groups, args.partitions = 50_000, 1_000, 25

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="cm-readiness-"))
    broker = None
    figures: dict[str, Any] = {"uptime_before": os.getloadavg()}
    try:
        bootstrap = args.bootstrap
        if bootstrap is None:
            from lab.broker import BrokerSettings, LocalKafka

            broker = LocalKafka(
                BrokerSettings(offsets_topic_num_partitions=args.offsets_partitions, heap="2g"),
                workdir / "kafka",
            ).start()
            bootstrap = broker.bootstrap
            t0 = time.monotonic()
            figures["records"] = preload(
                bootstrap, args.records, args.groups, args.partitions, args.topics, log=log
            )
            figures["preload_s"] = round(time.monotonic() - t0, 1)
        layout = Layout(args, last_group_per_partition(bootstrap))
        tools: list[Tool] = [MirrorTool("mirror", bootstrap, workdir, None)]
        if args.before is not None:
            tools.append(MirrorTool("before", bootstrap, workdir, args.before.resolve()))
        for spec in args.variant:
            name, _, assignments = spec.partition(":")
            env = dict(a.split("=", 1) for a in assignments.split(";") if a)
            tools.append(MirrorTool(name, bootstrap, workdir, None, env))
        tools.append(FloorTool(bootstrap, workdir, args.offsets_partitions))
        if os.environ.get("BURROW_BIN"):
            tools.append(BurrowTool(os.environ["BURROW_BIN"], bootstrap, workdir, layout))
        if os.environ.get("KMINION_BIN"):
            tools.append(KminionTool(os.environ["KMINION_BIN"], bootstrap, workdir))
        if args.tools:
            tools = [t for t in tools if t.name in args.tools]
        results: dict[str, list[dict[str, Any]]] = {t.name: [] for t in tools}
        for run in range(args.runs):
            # alternated, and each run in another order: no tool always follows the same one
            order = tools[run % len(tools) :] + tools[: run % len(tools)]
            for tool in order:
                import resource

                usage = resource.getrusage(resource.RUSAGE_CHILDREN)
                _reaped_cpu.before = usage.ru_utime + usage.ru_stime  # type: ignore[attr-defined]
                r = measure(tool, run, args.timeout, args.after_ready)
                results[tool.name].append(r)
                log(f"run {run + 1}/{args.runs} {tool.name}: {r} (load {os.getloadavg()[0]:.2f})")
                time.sleep(2)
        floor = results.get("floor") or []
        floor_s = statistics.median(r["ready_s"] for r in floor) if floor else None
        figures["results"] = results
        figures["uptime_after"] = os.getloadavg()
        print(table(results, floor_s))
        print(json.dumps(figures, indent=2))
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
