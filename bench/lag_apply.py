"""The backfill's hand-over to lag: every group at once into the lag tracker and Burrow's window.

    .venv/bin/python -m bench.lag_apply [--groups 10000] [--partitions 50] [--runs 2] [--chunks 0 1000]

After a backfill the sink hands every group's state bytes to the offsets thread at once, which
applies them (`streaming.app.lag_loop.LagLoop.apply`: decode, `LagTracker.apply_groups`, Burrow's
window).  For each ``--chunks`` value (groups decoded and applied at a time; 0: all of them decoded
first, then applied -- the code before `APPLY_CHUNK`), a fresh child process builds ``--groups``
real groups (the population of bench/series.py) as state bytes and applies them once; printed: CPU
seconds of the apply, the RSS growth it leaves (what the tracker and the window keep, plus what
the allocator did not give back) and the peak growth (VmHWM) during it.  Runs alternate; medians.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.driver_memory import rss


def child(groups: int, partitions: int, chunk: int) -> None:
    from lab.synthetic import synthetic_groups
    from state import codec
    from streaming.app import lag_loop
    from streaming.app.driver_events import DriverEvents
    from streaming.health.lag import LagTracker
    from streaming.serving.burrow import Burrow
    from streaming.serving.store import SnapshotStore

    blobs = [(g.group_id, codec.encode(g)) for g in synthetic_groups(groups, partitions)]
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    base, _ = rss()
    tracker = LagTracker()
    loop = lag_loop.LagLoop(
        10, SnapshotStore(), tracker, Burrow(tracker, "bench", 10, 1.0), reader=None, events=DriverEvents()
    )
    lag_loop.APPLY_CHUNK = chunk or len(blobs)
    t0 = time.process_time()
    loop.apply(blobs)
    cpu = time.process_time() - t0
    gc.collect()
    after, peak = rss()
    print(json.dumps({"cpu_s": cpu, "kept": after - base, "peak": peak - base}))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=50)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--chunks", type=int, nargs="+", default=[0, 1000])
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        child(args.groups, args.partitions, args.child)
        return 0
    results: dict[int, list[dict[str, float]]] = {c: [] for c in args.chunks}
    for _ in range(args.runs):
        for c in args.chunks:
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.lag_apply",
                    "--groups",
                    str(args.groups),
                    "--partitions",
                    str(args.partitions),
                    "--child",
                    str(c),
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results[c].append(json.loads(out.strip().splitlines()[-1]))
    print(f"{args.groups} groups x {args.partitions} partitions applied at once, medians of {args.runs}")
    print("| groups at a time | CPU s | RSS kept | RSS peak during the apply |")
    print("|---|---|---|---|")
    for c, rs in results.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("cpu_s", "kept", "peak")}
        label = "all (decode every group first)" if c == 0 else str(c)
        print(
            f"| {label} | {med['cpu_s']:.2f} | {med['kept'] / 2**20:,.0f} MB "
            f"| {med['peak'] / 2**20:,.0f} MB |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
