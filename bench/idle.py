"""What a quiet cluster costs: a caught-up mirror with nothing happening, and expiry still on time.

    .venv/bin/python -m bench.idle [--groups 10000] [--partitions 50] [--records 1000000]
        [--settle-s 60] [--idle-s 240] [--runs 1] [--before DIR] [--max-cores 0.15]
        [--expiry | --no-expiry] [--workdir DIR]

A local broker (50 partitions of ``__consumer_offsets``) is preloaded with ``--records`` offset
commits over ``--groups`` groups x ``--partitions`` partitions (`lab.preload`), and a share group
consumes a little, so that ``__share_group_state`` exists and the share-state query runs.  Then,
``--runs`` times (alternated with ``--before DIR``, a second source tree run with this tree's jars,
e.g. ``git worktree add /tmp/before main``):

* ``coordinator-mirror run`` with its defaults (lag on, share state on) on a new checkpoint, as a
  process of its own; ``--settle-s`` after ``/ready`` (the seed batch, the first lag rounds), then
  ``--idle-s`` of no traffic at all: the CPU of the process tree over that window, in cores, and by
  process (the driver, Spark's JVM, the client JVM, the Python workers); RSS and PSS of the tree
  at its end (ready + settle + idle: 5 minutes with the defaults), by process.  Nothing asks the
  mirror anything inside the window; after it (and after the RSS is read), one ``GET /metrics`` as
  Prometheus would make it: its CPU seconds, size, series and the driver's peak RSS meanwhile, and
  the idle cores plus one such scrape every 30 s.  (Until
  2026-11-29 the bench read its batch count off /metrics inside the window: at 10k x 50 that
  scrape was most of the driver's figure.)  ``--py-spy PATH``: a profile of the driver over the
  window, its busiest functions printed with the figures.
* ``--expiry`` (on by default): a second broker with ``offsets.retention.minutes=1`` and its
  sweep every 60 s; a mirror with the same rules, caught up and quiet; then a few offsets-only
  groups commit once: when each offset leaves the mirror's ``GET /groups/{id}`` against its
  ``expires_at_ms``, and against when the broker itself dropped it (its sweep).  Expiry is on time
  when the mirror drops every offset no later than the broker's check interval after its deadline
  (the broker's own precision), whatever the mirror does between batches.

Exit status: 1 -- with ``IDLE CPU`` or ``EXPIRY`` in the last line -- when this tree's median idle
cores exceed ``--max-cores`` or an offset was not dropped on time; otherwise 0.  A bench, not a
test: run it after a change that could bring the idle micro-batches back.  Figures are printed (a
table, then JSON).  The machine is shared: compare the ratios of one run, and read ``load``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from bench.readiness import MirrorTool, _get
from lab.proc import TreeSampler, stop_group

MB = 2**20


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _in_child(code: str) -> str:
    """Python code in a process of its own (librdkafka beside a JVM bridge: lab/preload.py)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def make_share_state_topic(bootstrap: str, seconds: float = 15.0) -> None:
    """A share group consumes a few records: the share coordinator creates ``__share_group_state``."""
    _in_child(
        "import multiprocessing as mp, time\n"
        "from bench.pipeline import share_load\n"
        "ctx = mp.get_context('spawn'); stop = ctx.Event(); sent = ctx.Value('q', 0)\n"
        f"p = ctx.Process(target=share_load, args=({bootstrap!r}, 50.0),\n"
        "                kwargs={'stop': stop, 'sent': sent})\n"
        f"p.start(); time.sleep({seconds}); stop.set(); p.join(60); print(sent.value)\n"
    )


def _py_spy(pid: int, args: argparse.Namespace, wd: Path) -> subprocess.Popen[bytes]:
    """``py-spy record`` of the driver over the idle window (its threads' busy samples, raw)."""
    cmd = [args.py_spy, "record", "--pid", str(pid), "--duration", str(int(args.idle_s)), "--rate", "50"]
    cmd += ["--format", "raw", "--output", str(wd / "driver.raw"), "--nonblocking"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _py_spy_top(spy: subprocess.Popen[bytes], raw: Path, top: int = 20) -> dict[str, Any]:
    """The driver's busy samples over the window: per thread, and the functions of this tree (and
    the libraries they call) with the largest share of them, inclusive."""
    spy.wait(60)
    threads: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines() if raw.exists() else []:
        stack, _, n_text = line.rpartition(" ")
        if not stack:
            continue
        n = int(n_text)
        total += n
        frames = stack.split(";")
        thread = next((f for f in frames if "_run (streaming/" in f or "work (streaming/" in f), frames[0])
        threads[thread] = threads.get(thread, 0) + n
        for f in set(frames):
            inclusive[f] = inclusive.get(f, 0) + n
    ranked = sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]
    return {
        "samples": total,
        "threads": dict(sorted(threads.items(), key=lambda kv: -kv[1])[:8]),
        "inclusive": {f: n for f, n in ranked},
    }


class IdleMirror(MirrorTool):
    """`MirrorTool`'s command with extra settings in the environment (``CM_*``)."""

    def __init__(self, name: str, bootstrap: str, workdir: Path, source: Path | None, **env: str) -> None:
        super().__init__(name, bootstrap, workdir, source, env)


def idle_run(tool: IdleMirror, run: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd, env, wd = tool.command(run)
    log_path = wd / "process.log"
    with open(log_path, "wb") as out:
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=wd,
            start_new_session=True,
        )  # fmt: skip
        sampler = TreeSampler(proc.pid, 1.0, pss=True).start()
        try:
            while tool.ready(proc) is False:
                if proc.poll() is not None or time.monotonic() - started > 900:
                    raise RuntimeError(f"{tool.name} never became ready; see {log_path}")
                time.sleep(0.2)
            ready_s = time.monotonic() - started
            url = f"http://127.0.0.1:{tool.port}"
            while batches(url) < 1:  # the first micro-batch (a new checkpoint's seed) is not idle
                if time.monotonic() - started > 900:
                    raise RuntimeError(f"{tool.name}: no micro-batch; see {log_path}")
                time.sleep(1)
            first_batch_s = time.monotonic() - started - ready_s
            time.sleep(args.settle_s)
            # the batch count is read off /metrics, whose render is a cost of its own (a scrape of
            # the default per-partition series: seconds of CPU at 10k x 50): before the window
            batches0 = batches(url)
            time.sleep(2)
            sampler.sample()
            cpu0 = dict(sampler.cpu_parts)
            began = time.monotonic()
            spy = _py_spy(proc.pid, args, wd) if args.py_spy else None
            time.sleep(args.idle_s)
            sampler.sample()
            window = time.monotonic() - began
            cpu1 = dict(sampler.cpu_parts)
            # the tree at the end of the window (its last scrape 120 s before): RSS and PSS by kind
            sampler.peak_rss = sampler.peak_pss = 0
            sampler.sample()
            rss, rss_parts = sampler.peak_rss, dict(sampler.peak_parts)
            pss, pss_parts = sampler.peak_pss, dict(sampler.peak_pss_parts)
            scrape = one_scrape(url, sampler)
            batches1 = batches(url)
            parts = {k: round((cpu1.get(k, 0.0) - cpu0.get(k, 0.0)) / window, 3) for k in cpu1}
            profile = _py_spy_top(spy, wd / "driver.raw") if spy is not None else None
            return {
                "tree": tool.name,
                "ready_s": round(ready_s, 1),
                "first_batch_after_ready_s": round(first_batch_s, 1),
                "idle_cores": round(sum(parts.values()), 3),
                "idle_batches": batches1 - batches0,
                **scrape,
                "idle_cores_scraped_every_30s": round(sum(parts.values()) + scrape["scrape_cpu_s"] / 30, 3),
                "idle_cores_parts": {k: v for k, v in sorted(parts.items()) if v},
                "rss_mb": round(rss / MB),
                "rss_parts_mb": {k: round(v / MB) for k, v in sorted(rss_parts.items())},
                "pss_mb": round(pss / MB),
                "pss_parts_mb": {k: round(v / MB) for k, v in sorted(pss_parts.items())},
                "at_s_after_ready": round(time.monotonic() - started - ready_s),
                "load": [round(x, 1) for x in os.getloadavg()],
                **({"driver_profile": profile} if profile is not None else {}),
            }
        finally:
            sampler.stop()
            stop_group(proc, 90)


def batches(url: str) -> int:
    """The mirror's micro-batches so far (``coordinator_mirror_batches_total``, every cluster)."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=30) as resp:
            text = resp.read().decode()
    except OSError:
        return 0
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("coordinator_mirror_batches_total")
    )


def one_scrape(url: str, sampler: TreeSampler) -> dict[str, Any]:
    """One ``GET /metrics`` of the idle mirror, as Prometheus would make it: the CPU it costs the
    tree, its wall time, size and series (the render after a lag round changed the tracker)."""
    import urllib.request

    sampler.peak_rss = 0
    sampler.sample()
    cpu0 = sum(sampler.cpu_parts.values())
    began = time.monotonic()
    with urllib.request.urlopen(f"{url}/metrics", timeout=300) as resp:
        body = resp.read()
    wall = time.monotonic() - began
    sampler.sample()
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return {
        "scrape_peak_driver_rss_mb": round(sampler.peak_parts.get("root", 0) / MB),
        "scrape_cpu_s": round(sum(sampler.cpu_parts.values()) - cpu0, 2),
        "scrape_wall_s": round(wall, 2),
        "scrape_mb": round(len(body) / MB, 1),
        "scrape_series": series,
    }


def _commit(bootstrap: str, groups: list[str], *, create: bool = False, pause_s: float = 0.0) -> None:
    """One offset commit per group (an offsets-only group), in a process of its own."""
    _in_child(
        "import time\n"
        "from confluent_kafka import ConsumerGroupTopicPartitions as G, TopicPartition as T\n"
        "from confluent_kafka.admin import AdminClient, NewTopic\n"
        f"a = AdminClient({{'bootstrap.servers': {bootstrap!r}, 'log_level': 0}})\n"
        + (
            "a.create_topics([NewTopic('idle-expiry-t', 3, 1)])['idle-expiry-t'].result(60); time.sleep(2)\n"
            if create
            else ""
        )
        + f"for i, g in enumerate({groups!r}):\n"
        "    for f in a.alter_consumer_group_offsets([G(g, [T('idle-expiry-t', i % 3, 10 + i)])]).values():\n"
        "        f.result(30)\n"
        f"    time.sleep({pause_s})\n"
        "print(len(a.list_topics().topics))\n"
    )


def expiry_run(bootstrap: str, tool: IdleMirror, args: argparse.Namespace, check_ms: int) -> dict[str, Any]:
    """Offsets-only groups commit once to a broker expiring offsets after a minute; when each
    offset leaves the mirror's API and the broker's own listing, against its deadline."""
    cmd, env, wd = tool.command(0)
    env.update(
        CM_OFFSETS_RETENTION_MINUTES="1",
        CM_OFFSETS_RETENTION_CHECK_INTERVAL_MS=str(check_ms),
        CM_SHARE_STATE_ENABLED="false",
    )
    groups = [f"idle-expiry-{i}" for i in range(args.expiry_groups)]
    with open(wd / "process.log", "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=wd,
            start_new_session=True,
        )  # fmt: skip
    sampler = TreeSampler(proc.pid, 1.0).start()
    url = f"http://127.0.0.1:{tool.port}"
    try:
        while not tool.ready(proc):
            assert proc.poll() is None, (wd / "process.log").read_text()[-3000:]
            time.sleep(0.2)
        # the query's first batch (a new session's Python workers, a cold JVM: up to a minute on a
        # loaded machine) is not what this measures: a warm-up group first, then quiet
        _commit(bootstrap, ["idle-expiry-warm-up"], create=True)
        wait_until = time.monotonic() + 300
        while _get(f"{url}/groups/idle-expiry-warm-up")[0] != 200:
            assert time.monotonic() < wait_until, "the warm-up group never showed"
            time.sleep(0.5)
        time.sleep(15)
        _commit(bootstrap, groups, pause_s=1.5)  # deadlines 1.5 s apart: one wake each
        deadlines: dict[str, int] = {}
        wait_until = time.monotonic() + 60
        while len(deadlines) < len(groups) and time.monotonic() < wait_until:
            for g in groups:
                status, snap = _get(f"{url}/groups/{urllib.parse.quote(g)}")
                if status == 200 and snap.get("offsets"):
                    deadlines[g] = int(snap["offsets"][0]["expires_at_ms"])
            time.sleep(0.2)
        if len(deadlines) < len(groups):
            raise RuntimeError(f"the mirror never showed {set(groups) - set(deadlines)}")
        cpu0, _ = sampler.sample()
        began = time.monotonic()
        mirror_gone: dict[str, int] = {}
        broker_gone: dict[str, int] = {}
        stop_at = time.time() + (max(deadlines.values()) - time.time() * 1000) / 1000 + check_ms / 1000 + 60
        probe = (
            "import sys, json\n"
            "from confluent_kafka import ConsumerGroupTopicPartitions as G\n"
            "from confluent_kafka.admin import AdminClient\n"
            f"a = AdminClient({{'bootstrap.servers': {bootstrap!r}, 'log_level': 0}})\n"
            "out = {}\n"
            "for g in json.loads(sys.argv[1]):\n"
            "    r = a.list_consumer_group_offsets([G(g)])[g].result(30)\n"
            "    out[g] = len([tp for tp in r.topic_partitions if tp.offset >= 0])\n"
            "print(json.dumps(out))\n"
        )
        next_broker_look = 0.0
        while (len(mirror_gone) < len(groups) or len(broker_gone) < len(groups)) and time.time() < stop_at:
            now = int(time.time() * 1000)
            for g in groups:
                if g not in mirror_gone:
                    status, snap = _get(f"{url}/groups/{urllib.parse.quote(g)}")
                    if status != 200 or not snap.get("offsets"):
                        mirror_gone[g] = now
            if time.monotonic() >= next_broker_look and len(broker_gone) < len(groups):
                next_broker_look = time.monotonic() + 1.0
                left = [g for g in groups if g not in broker_gone]
                cmd_probe = [sys.executable, "-c", probe, json.dumps(left)]
                out = subprocess.run(cmd_probe, capture_output=True, text=True, check=True)
                at = int(time.time() * 1000)
                for g, n in json.loads(out.stdout.strip().splitlines()[-1]).items():
                    if n == 0:
                        broker_gone[g] = at
            time.sleep(0.1)
        cpu1, _ = sampler.sample()
        late = {g: mirror_gone[g] - d for g, d in deadlines.items() if g in mirror_gone}
        broker_late = {g: broker_gone[g] - d for g, d in deadlines.items() if g in broker_gone}
        return {
            "groups": len(groups),
            "broker_check_interval_ms": check_ms,
            "mirror_dropped": len(mirror_gone),
            "mirror_after_deadline_ms": sorted(late.values()),
            "broker_after_deadline_ms": sorted(broker_late.values()),
            "early": sorted(v for v in late.values() if v < 0),
            "cores_while_waiting": round((cpu1 - cpu0) / (time.monotonic() - began), 3),
        }
    finally:
        sampler.stop()
        stop_group(proc, 90)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--settle-s", type=float, default=60.0)
    ap.add_argument("--idle-s", type=float, default=240.0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--before", type=Path, default=None, help="a source tree run as 'before', alternated")
    ap.add_argument("--max-cores", type=float, default=0.15, help="this tree's idle cores at most")
    ap.add_argument("--expiry", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--expiry-groups", type=int, default=6)
    ap.add_argument("--expiry-check-ms", type=int, default=60_000, help="the expiry broker's sweep")
    ap.add_argument("--setting", action="append", default=[], metavar="CM_VAR=VALUE",
                    help="an extra setting of this tree's mirror (repeatable)")  # fmt: skip
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--py-spy", default=None, metavar="PATH",
                    help="py-spy's binary: profile the driver over the idle window")  # fmt: skip
    args = ap.parse_args()
    from lab.broker import BrokerSettings, LocalKafka

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-idle-"))
    extra = dict(s.split("=", 1) for s in args.setting)
    figures: dict[str, Any] = {"load_before": [round(x, 1) for x in os.getloadavg()], "runs": []}
    failures: list[str] = []
    broker = LocalKafka(BrokerSettings(offsets_topic_num_partitions=50, heap="1g"), workdir / "kafka").start()
    try:
        code = (
            "from lab.preload import preload; "
            f"print(preload({broker.bootstrap!r}, {args.records}, {args.groups}, {args.partitions}, 20))"
        )
        log(f"preload: {_in_child(code)} commits")
        make_share_state_topic(broker.bootstrap)
        log("share group consumed: __share_group_state exists")
        trees = [IdleMirror("after", broker.bootstrap, workdir, None, **extra)]
        if args.before is not None:
            trees.append(IdleMirror("before", broker.bootstrap, workdir, args.before.resolve()))
        for run in range(args.runs):
            for tool in trees if run % 2 == 0 else trees[::-1]:
                r = idle_run(tool, run, args)
                figures["runs"].append(r)
                log(f"{r['tree']} run {run}: {json.dumps(r)}")
    finally:
        broker.cleanup()
    if args.expiry:
        ebroker = LocalKafka(
            BrokerSettings(
                offsets_topic_num_partitions=3,
                offsets_retention_minutes=1,
                offsets_retention_check_interval_ms=args.expiry_check_ms,
            ),
            workdir / "kafka-expiry",
        ).start()
        try:
            tool = IdleMirror("after-expiry", ebroker.bootstrap, workdir, None, **extra)
            e = figures["expiry"] = expiry_run(ebroker.bootstrap, tool, args, args.expiry_check_ms)
            log(f"expiry: {json.dumps(e)}")
            latest = max(e["mirror_after_deadline_ms"], default=None)
            late = latest is None or latest > args.expiry_check_ms
            if e["mirror_dropped"] < e["groups"] or e["early"] or late:
                failures.append(
                    f"EXPIRY: {e['mirror_dropped']}/{e['groups']} offsets dropped, after their deadlines "
                    f"{e['mirror_after_deadline_ms']} ms (at most {args.expiry_check_ms}, never before)"
                )
        finally:
            ebroker.cleanup()
    print(
        "\n| tree | ready s | idle cores | batches | by process | one /metrics scrape: CPU s, MB, series "
        "| idle cores + a scrape every 30 s | RSS MB | PSS MB | PSS by kind | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in figures["runs"]:
        cells = [r[k] for k in ("tree", "ready_s", "idle_cores", "idle_batches", "idle_cores_parts")]
        cells.append(f"{r['scrape_cpu_s']}, {r['scrape_mb']}, {r['scrape_series']}")
        cells.append(r["idle_cores_scraped_every_30s"])
        cells += [r[k] for k in ("rss_mb", "pss_mb", "pss_parts_mb", "load")]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    mine = [r["idle_cores"] for r in figures["runs"] if r["tree"] == "after"]
    figures["after_idle_cores_median"] = statistics.median(mine)
    before = [r["idle_cores"] for r in figures["runs"] if r["tree"] == "before"]
    if before:
        figures["before_idle_cores_median"] = statistics.median(before)
    print(json.dumps(figures, indent=2))
    if figures["after_idle_cores_median"] > args.max_cores:
        failures.append(
            f"IDLE CPU: {figures['after_idle_cores_median']} cores with nothing happening "
            f"(at most {args.max_cores})"
        )
    for f in failures:
        print(f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
