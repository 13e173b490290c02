"""The demo's first minute, as a newcomer meets it: `coordinator-mirror demo` from start to Ctrl-C.

    .venv/bin/python -m bench.demo_start [--runs 2] [--before DIR] [--archive on|off|both]
        [--kinds-timeout 120] [--workdir DIR]

Each run starts ``coordinator-mirror demo`` (its own local broker, demo groups, a new checkpoint)
as a terminal would -- a process group of its own, the demo its leader -- and prints

* **ready**: seconds from the command's start to ``GET /ready`` answering 200;
* **kinds**: seconds until ``GET /groups`` lists a group of each kind -- classic, consumer
  (KIP-848), share, streams -- and the first time each kind showed;
* **stop**: after SIGINT to the whole process group (what Ctrl-C sends), seconds until the demo
  exited, its exit code, the lines it printed from the signal on, whether any of them is a
  traceback, and the processes of the group (or of the demo's process tree, whatever session
  they moved to) still alive 5 s after the exit.

``--before DIR`` runs a second demo from the source tree at ``DIR`` (e.g. ``git worktree add
/tmp/before main``) with this tree's jars, alternated with this one.  ``--archive`` runs with the
Spark driver's class archive (``on``: what the jars folder holds), without it (``off``:
``COORDINATOR_MIRROR_CLASS_ARCHIVE=off``) or both, alternated.  The caches the runs share (the OS
page cache, the jars) are warm after the first run: compare runs of one invocation.  Prints a line
per run, then JSON; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from lab.proc import free_port, tree_pids

KINDS = ("classic", "consumer", "share", "streams")


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return 0, None


def _group_members(pgid: int) -> list[int]:
    """Every live process whose process group is ``pgid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                out.append(int(entry))
    return out


def _describe(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


def one_run(source: Path, archive: str, kinds_timeout_s: float, workdir: Path) -> dict[str, Any]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(source))
    if archive == "off":
        env["COORDINATOR_MIRROR_CLASS_ARCHIVE"] = "off"
    log_path = workdir / f"demo-{time.monotonic_ns()}.log"
    cmd = [sys.executable, "-m", "streaming.app.cli", "demo", "--http-port", str(port),
           "--workdir", str(workdir / "demo")]  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir,
                                start_new_session=True)  # fmt: skip
    result: dict[str, Any] = {"source": str(source), "archive": archive, "ready_s": None, "kinds_s": None}
    seen: dict[str, float] = {}
    tree: set[int] = set()
    try:
        deadline = started + kinds_timeout_s
        while time.monotonic() < deadline and proc.poll() is None:
            tree.update(tree_pids(proc.pid))
            now = time.monotonic() - started
            if result["ready_s"] is None and _get(f"{base}/ready")[0] == 200:
                result["ready_s"] = round(now, 1)
            status, body = _get(f"{base}/groups")
            if status == 200 and body:
                for row in body["groups"]:
                    seen.setdefault(str(row.get("kind")), round(now, 1))
            if result["ready_s"] is not None and all(k in seen for k in KINDS):
                result["kinds_s"] = max(seen[k] for k in KINDS)
                break
            time.sleep(0.5)
        result["first_seen_s"] = seen
        tree.update(tree_pids(proc.pid))
        mark = log_path.stat().st_size
        signalled = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
        try:
            result["exit"] = proc.wait(180)
        except subprocess.TimeoutExpired:
            result["exit"] = "still running after 180 s"
        result["stop_s"] = round(time.monotonic() - signalled, 1)
        time.sleep(5)
        after = log_path.read_bytes()[mark:].decode(errors="replace").splitlines()
        result["lines_after_sigint"] = len(after)
        result["traceback"] = any("Traceback" in ln for ln in after)
        result["after_sigint"] = after[:12]
        left = set(_group_members(proc.pid)) | {p for p in tree if Path(f"/proc/{p}").exists()}
        left = {p for p in left if _alive(p)}
        result["left_running"] = [f"{p} {_describe(p)}" for p in sorted(left)]
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        for p in tree:  # whatever moved to a session of its own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if _alive(p):
                    os.kill(p, signal.SIGKILL)
    return result


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--before", type=Path, help="a second source tree, run alternated with this one")
    ap.add_argument("--archive", choices=["on", "off", "both"], default="on")
    ap.add_argument("--kinds-timeout", type=float, default=120.0)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args(argv)
    here = Path(__file__).resolve().parents[1]
    sources = [here] + ([args.before.resolve()] if args.before else [])
    archives = ["on", "off"] if args.archive == "both" else [args.archive]
    results = []
    with tempfile.TemporaryDirectory(prefix="cm-demo-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for run in range(args.runs):
            for source in sources:
                for archive in archives:
                    load = os.getloadavg()
                    r = one_run(source, archive, args.kinds_timeout, workdir)
                    r.update(run=run, load_before=[round(x, 2) for x in load])
                    results.append(r)
                    print(
                        f"run {run} {source.name} archive={archive}: ready {r['ready_s']} s, every kind "
                        f"{r['kinds_s']} s {r['first_seen_s']}; "
                        f"SIGINT -> exit {r['exit']} in {r['stop_s']} s, "
                        f"{r['lines_after_sigint']} line(s), traceback {r['traceback']}, "
                        f"left running {len(r['left_running'])}; load {r['load_before']}",
                        flush=True,
                    )
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
