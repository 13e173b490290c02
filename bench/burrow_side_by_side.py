"""The mirror beside a real Burrow on the same broker and consumers: do their verdicts agree?

    BURROW_BIN=/path/to/burrow .venv/bin/python -m bench.burrow_side_by_side [--bootstrap HOST:PORT]
        [--interval-s 2] [--tick-s 4] [--scenario NAME ...] [--workdir DIR]

Plays the consumers of `lab.burrow_scenarios` (keeping up, slow, stopped, stalled, rewinding,
idle, stopped on a quiet topic, reset backwards after catching up, rewound and recovered, a group
with one partition keeping up and one stalled) on a broker -- ``--bootstrap``, or a local one the
lab starts -- while ``coordinator-mirror run`` (a process of its own) and Burrow both follow it,
configured alike: Burrow's storage ``intervals=10``, ``min-distance=1``, its cluster's
``offset-refresh`` = the mirror's ``lag_interval_s`` = ``--interval-s``, evaluator
``expire-cache=1``; the mirror reads the high watermark, as Burrow does
(``lag_isolation=read_uncommitted``).  Burrow 1.9.5 builds from its source with ``go build``
(``fetch github:linkedin/Burrow``; the Go proxy refuses ``go install`` of it).

Prints, per group and partition, Burrow's status, the mirror's, the verdict the scenario expects
(Burrow 1.9.5's rules), their current lags and whether they agree: the same status, and lags
within one sampling interval of each other (the messages appended in ``--interval-s``); then how
often they agreed at the ticks before the end (where a transition can fall between two samples of
one side).  Without ``BURROW_BIN`` only the mirror runs, against the expected verdicts.  Not part
of the test suite (it needs a Burrow binary and ~2 minutes); tests/test_live/test_parity_live.py
checks the mirror against the same scenarios' expected verdicts under CI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from lab.burrow_scenarios import CHECK_TICK, Scenario, ScenarioRun, by_name, passes_through
from lab.mirror_process import MirrorProcess
from lab.proc import free_port as _free_port

CLUSTER = "local"
INTERVALS = 10
#: ticks from which the per-tick statuses are compared (every window full of commits made after
#: the first log end was sampled)
COMPARE_FROM = 12


def _get(url: str, timeout_s: float = 10.0) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            body = resp.read()
            status = resp.status
    except urllib.error.HTTPError as err:
        body, status = err.read(), err.code
    except OSError:
        return 0, None
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode(errors="replace")


def burrow_toml(
    bootstrap: str,
    port: int,
    client_id: str,
    *,
    cluster: dict[str, int] | None = None,
    storage: dict[str, int] | None = None,
    evaluator: dict[str, int] | None = None,
) -> str:
    """A Burrow configuration reading ``bootstrap``'s offsets from the topic's start
    (``start-latest=false``) into the in-memory store, its HTTP server on ``port``; ``cluster``,
    ``storage`` and ``evaluator`` override Burrow's defaults in those sections."""
    servers = json.dumps(bootstrap.split(","))

    def extra(options: dict[str, int] | None) -> str:
        return "".join(f"{k}={v}\n" for k, v in (options or {}).items())

    return f"""[general]
[logging]
level="warn"
[client-profile.local]
client-id="{client_id}"
kafka-version="2.8.0"
[cluster.{CLUSTER}]
class-name="kafka"
client-profile="local"
servers={servers}
{extra(cluster)}[consumer.{CLUSTER}]
class-name="kafka"
cluster="{CLUSTER}"
client-profile="local"
servers={servers}
start-latest=false
[storage.default]
class-name="inmemory"
{extra(storage)}[evaluator.default]
class-name="caching"
{extra(evaluator)}[httpserver.default]
address="127.0.0.1:{port}"
"""


class Burrow:
    """A real Burrow process configured like the mirror."""

    def __init__(self, binary: str, bootstrap: str, workdir: Path, interval_s: int) -> None:
        self.binary = binary
        self.port = _free_port()
        self.workdir = workdir / "burrow"
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "burrow.toml").write_text(
            burrow_toml(
                bootstrap,
                self.port,
                "burrow-side-by-side",
                cluster={"topic-refresh": 2, "offset-refresh": interval_s, "groups-reaper-refresh": 0},
                storage={"workers": 4, "intervals": INTERVALS, "expire-group": 604800, "min-distance": 1},
                evaluator={"expire-cache": 1},
            )
        )
        self.log_path = self.workdir / "burrow.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> Burrow:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "--config-dir", str(self.workdir)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"burrow exited ({self.process.returncode}):\n{self.log_tail()}")
            if _get(self.url + "/burrow/admin", 2)[0] == 200:
                return self
            time.sleep(0.3)
        raise TimeoutError(f"burrow did not answer on {self.url}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "".join(text.splitlines(keepends=True)[-lines:])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)


def statuses(url: str, groups: list[str]) -> dict[str, Any]:
    """Group -> Burrow-shaped status (``/v3/kafka/{cluster}/consumer/{group}/lag``), or None."""
    out: dict[str, Any] = {}
    for g in groups:
        status, body = _get(f"{url}/v3/kafka/{CLUSTER}/consumer/{urllib.parse.quote(g, safe='')}/lag")
        out[g] = body["status"] if status == 200 and isinstance(body, dict) else None
    return out


def windows(url: str, group: str) -> dict[int, list[int]]:
    """partition -> the offsets in the group's window (``/v3/kafka/{cluster}/consumer/{group}``)."""
    status, body = _get(f"{url}/v3/kafka/{CLUSTER}/consumer/{urllib.parse.quote(group, safe='')}")
    if status != 200 or not isinstance(body, dict):
        return {}
    return {
        p: [o["offset"] for o in part["offsets"] if o]
        for parts in body["topics"].values()
        for p, part in enumerate(parts)
    }


def partition_view(st: Any) -> dict[int, tuple[str, int]]:
    """partition -> (status, current lag) of one group's status (one topic per group here)."""
    if not st:
        return {}
    return {p["partition"]: (p["status"], p["current_lag"]) for p in st["partitions"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", help="a running broker (default: start one with the lab)")
    p.add_argument("--interval-s", type=int, default=2, help="Burrow's offset-refresh = lag_interval_s")
    p.add_argument("--tick-s", type=float, default=4.0, help="seconds between two commits of a consumer")
    p.add_argument("--scenario", action="append", help="run only these (default: all)")
    p.add_argument("--workdir", help="keep logs and configs here (default: a temporary directory)")
    p.add_argument(
        "--mirror-source",
        help="run the mirror from this checkout instead (e.g. `git archive <rev> | tar -x -C DIR`): "
        "what an older version said",
    )
    args = p.parse_args()
    if args.tick_s < 2 * args.interval_s:
        p.error("--tick-s must be at least twice --interval-s (one commit per round on both sides)")
    burrow_bin = os.environ.get("BURROW_BIN")
    if burrow_bin and not (Path(burrow_bin).is_file() and os.access(burrow_bin, os.X_OK)):
        print(f"BURROW_BIN={burrow_bin} is not an executable file", file=sys.stderr)
        return 2
    scenarios = by_name(args.scenario)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="burrow-side-by-side-"))
    started = time.monotonic()

    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap
        if bootstrap is None:
            from lab.broker import BrokerSettings, LocalKafka
            from streaming.jars import kafka_version

            broker = LocalKafka(BrokerSettings(kafka_version=kafka_version()), workdir / "kafka").start()
            stack.callback(broker.stop)
            bootstrap = broker.bootstrap
        prefix = f"sbs{int(time.time()) % 100000}"
        run = ScenarioRun(bootstrap, scenarios, prefix, args.tick_s)
        run.setup()
        groups = [run.group(s) for s in scenarios]

        if args.mirror_source:
            # `python -m` puts the working directory first on sys.path: run from the checkout
            source = Path(args.mirror_source).resolve()
            os.environ["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(source), os.environ.get("PYTHONPATH")])
            )
            os.chdir(source)
        mirror = MirrorProcess(
            workdir / "mirror",
            bootstrap=bootstrap,
            settings={
                "cluster_name": CLUSTER,
                "lag_interval_s": float(args.interval_s),
                "burrow_intervals": INTERVALS,
                "burrow_min_distance_s": 1.0,
                "lag_isolation": "read_uncommitted",
            },
            spark_ui=False,
        ).start()
        stack.callback(mirror.stop)
        burrow = None
        if burrow_bin:
            burrow = Burrow(burrow_bin, bootstrap, workdir, args.interval_s).start()
            stack.callback(burrow.stop)
            # Burrow stores a commit only for a topic its cluster module has read ends of
            deadline = time.monotonic() + 120
            while True:
                _, body = _get(f"{burrow.url}/v3/kafka/{CLUSTER}/topic")
                known = set(body.get("topics") or ()) if isinstance(body, dict) else set()
                if {run.topic(s) for s in scenarios} <= known:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"burrow does not know the topics:\n{burrow.log_tail()}")
                time.sleep(0.5)
        mirror.wait_ready(300)
        run.warm_up(mirror)
        print(
            f"# broker {bootstrap}, mirror {mirror.url}, burrow {burrow.url if burrow else '-'}; "
            f"interval {args.interval_s}s, tick {args.tick_s}s, {len(scenarios)} scenarios",
            flush=True,
        )

        seen: dict[str, dict[tuple[str, int], list[tuple[int, str | None, str | None]]]] = {}

        def on_tick(k: int) -> None:
            m = statuses(mirror.url, groups)
            b = statuses(burrow.url, groups) if burrow else {}
            for s in scenarios:
                g = run.group(s)
                mv, bv = partition_view(m.get(g)), partition_view(b.get(g))
                for part in range(s.partitions):
                    row = (k, bv.get(part, (None, 0))[0], mv.get(part, (None, 0))[0])
                    seen.setdefault(s.name, {}).setdefault((g, part), []).append(row)

        run.run(on_tick)
        time.sleep(2 * args.interval_s + 3)  # the last commits through both
        # the final verdicts: both read at the same moment, up to 5 times until they agree
        for _attempt in range(5):
            m = statuses(mirror.url, groups)
            b = statuses(burrow.url, groups) if burrow else m
            if all(_agree(s, run, m, b, args.interval_s)[0] for s in scenarios):
                break
            time.sleep(1)
        ok = _table(scenarios, run, m, b if burrow else None, args.interval_s, seen)
        if burrow is not None:
            same = 0
            for s in scenarios:
                wm, wb = windows(mirror.url, run.group(s)), windows(burrow.url, run.group(s))
                for part in range(s.partitions):
                    if wm.get(part) == wb.get(part):
                        same += 1
                    else:
                        print(f"#   {s.name} p{part} windows: burrow {wb.get(part)} mirror {wm.get(part)}")
            total = sum(s.partitions for s in scenarios)
            print(f"# windows of commits identical on {same}/{total} partitions")
        print(f"# wall time {time.monotonic() - started:.0f}s; logs in {workdir}")
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


def _tolerance(s: Scenario, interval_s: int) -> int:
    """Messages one sampling interval adds: how far two samplers' ends (and lags) can be apart."""
    return int(s.rate * interval_s) + 1


def _agree(
    s: Scenario, run: ScenarioRun, m: dict[str, Any], b: dict[str, Any], interval_s: int
) -> tuple[bool, str]:
    g = run.group(s)
    mv, bv = partition_view(m.get(g)), partition_view(b.get(g))
    if not mv or not bv:
        return False, "missing"
    for part in range(s.partitions):
        (bs, bl), (ms, ml) = bv.get(part, ("-", -1)), mv.get(part, ("-", -1))
        if bs != ms or abs(bl - ml) > _tolerance(s, interval_s):
            return False, f"partition {part}"
    if (m.get(g) or {}).get("status") != (b.get(g) or {}).get("status"):
        return False, "group"
    return True, ""


def _table(  # noqa: PLR0917 - one call site, all of it printed
    scenarios: list[Scenario],
    run: ScenarioRun,
    m: dict[str, Any],
    b: dict[str, Any] | None,
    interval_s: int,
    seen: dict[str, dict[tuple[str, int], list[tuple[int, str | None, str | None]]]],
) -> bool:
    head = (
        "scenario",
        "p",
        "expected",
        "burrow",
        "mirror",
        "lag burrow",
        "lag mirror",
        "agree",
        "ticks agreeing",
    )
    rows = []
    all_ok = True
    for s in scenarios:
        g = run.group(s)
        mv = partition_view(m.get(g))
        bv = partition_view(b.get(g)) if b is not None else {}
        for part in range(s.partitions):
            ms, ml = mv.get(part, ("-", -1))
            bs, bl = bv.get(part, ("-", -1)) if b is not None else ("n/a", -1)
            want = s.expected[part]
            ticks = [t for t in seen.get(s.name, {}).get((g, part), []) if t[0] >= COMPARE_FROM]
            if b is not None:
                agree = bs == ms and abs(bl - ml) <= _tolerance(s, interval_s) and bs == want
                same = sum(1 for _, x, y in ticks if x == y)
                trail = f"{same}/{len(ticks)}"
            else:
                agree = ms == want
                trail = "-"
            through = [
                y
                for t, _, y in seen.get(s.name, {}).get((g, part), [])
                if s.passes_between[0] <= t <= s.passes_between[1]
            ]
            if s.passes and not passes_through(through, s.passes):
                trail += f" (mirror did not pass {'->'.join(s.passes)}: {through})"
                agree = False
            all_ok &= agree
            rows.append(
                (
                    s.name,
                    str(part),
                    want,
                    bs,
                    ms,
                    str(bl) if bl >= 0 else "-",
                    str(ml),
                    "yes" if agree else "NO",
                    trail,
                )
            )
        gs_m = (m.get(g) or {}).get("status", "-")
        gs_b = (b.get(g) or {}).get("status", "-") if b is not None else "n/a"
        group_ok = gs_m == s.expected_group and (b is None or gs_b == gs_m)
        all_ok &= group_ok
        rows.append((s.name, "group", s.expected_group, gs_b, gs_m, "", "", "yes" if group_ok else "NO", ""))
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    for s in scenarios:
        for (_g, part), ticks in sorted(seen.get(s.name, {}).items()):
            differ = [f"{k}: {x}/{y}" for k, x, y in ticks if k >= COMPARE_FROM and b is not None and x != y]
            if differ:
                print(f"#   {s.name} p{part} ticks where burrow/mirror differ: {', '.join(differ)}")
    n = sum(1 for r in rows if r[1] != "group")
    agreed = sum(1 for r in rows if r[1] != "group" and r[7] == "yes")
    side = "Burrow and the mirror agree" if b is not None else "the mirror gives Burrow's verdict"
    print(f"# {side} on {agreed}/{n} partitions and "
          f"{sum(1 for r in rows if r[1] == 'group' and r[7] == 'yes')}/{len(scenarios)} groups "
          f"(lag within one sampling interval; checked after tick {CHECK_TICK})")  # fmt: skip
    return all_ok


if __name__ == "__main__":
    sys.exit(main())
