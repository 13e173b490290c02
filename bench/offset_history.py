"""The offset history's driver memory, state size and CPU for a large cluster (issue 38).

    .venv/bin/python -m bench.offset_history [--groups 10000] [--partitions 50] [--hours 24]

``--groups`` `lab.synthetic` groups (80% Stable classic, 15% Empty classic, 5% KIP-848) commit
every partition again at each step of a day (the injected clock) -- each partition further by a
random count, the commit's timestamp a random few seconds before the step -- and their state bytes go to
`OffsetHistory.on_batch` as the query's sink hands them over, 1000 groups a batch.  The steps are
the points the default tiers keep after thinning -- every 10 s for the newest 10 minutes, every 5
minutes up to 2 hours, every 30 minutes up to ``--hours`` -- so the history ends where a day of
commits (at any rate at least that fast) would leave it after upkeep, without folding a day of
batches.  Upkeep (`maintain`) runs every simulated minute of the newest 10 minutes and at each
older step.  Prints the points kept, the history's own count of its bytes (`nbytes`), this
process's RSS growth, the snapshot file's size and the time to write and to load it, the time a
batch of 1000 groups takes in `on_batch`, and the time of one ``at`` answer.  Python only.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import namedtuple
from pathlib import Path

import numpy as np

from lab.synthetic import STATE_SETTINGS, synthetic_groups
from state import codec
from state.snapshot import summary
from streaming.serving.offset_history import OffsetHistory

Row = namedtuple("Row", "group_id kind key body summary blob")
BATCH = 1000
MIN = 60_000
TIERS = [(10 * MIN, 0), (120 * MIN, 5 * MIN), (24 * 60 * MIN, 30 * MIN)]


def rss() -> int:
    """VmRSS of this process in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def steps(hours: float, now_ms: int) -> list[int]:
    """The commit times, oldest first, that the default tiers keep at ``now_ms``."""
    start = now_ms - int(hours * 60 * MIN)
    out = list(range(start, now_ms - 120 * MIN, 30 * MIN))
    out += range(now_ms - 120 * MIN, now_ms - 10 * MIN, 5 * MIN)
    out += range(now_ms - 10 * MIN, now_ms + 1, 10_000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--hours", type=float, default=24.0)
    a = ap.parse_args()

    now = int(time.time() * 1000)
    times = steps(a.hours, now)
    groups = list(synthetic_groups(a.groups, a.partitions))
    rng = np.random.default_rng(38)
    progress = [np.array([e[0] for e in g.offsets.values()], dtype=np.int64) for g in groups]
    clock = {"ms": times[0]}
    work = Path(tempfile.mkdtemp(prefix="offset-history-bench-"))
    history = OffsetHistory(TIERS, int(a.hours * 60 * MIN), work, clock_ms=lambda: clock["ms"])
    history.load()
    before = rss()
    batch_s: list[float] = []
    upkeep_s = 0.0
    for k, t in enumerate(times):
        clock["ms"] = t
        rows = []
        for n, g in enumerate(groups):
            # every partition further by a random count (a real consumer's irregular progress), the
            # commit a few seconds before the step: delta coding and zlib get no free ride
            g2 = g.copy()
            ahead = progress[n]
            ahead += rng.integers(0, 5_000, len(ahead))
            back = rng.integers(0, 5_000, len(ahead))
            g2.offsets = {
                tp: (int(ahead[i]), *e[1:3], t - int(back[i]), *e[4:])
                for i, (tp, e) in enumerate(g.offsets.items())
            }
            rows.append(
                Row(
                    g2.group_id,
                    "snapshot",
                    None,
                    None,
                    json.dumps(summary(g2, STATE_SETTINGS)),
                    codec.encode(g2),
                )
            )
        for i in range(0, len(rows), BATCH):
            began = time.perf_counter()
            history.on_batch(k, rows[i : i + BATCH])
            batch_s.append(time.perf_counter() - began)
        if t < now - 10 * MIN or (t - times[0]) % MIN == 0:
            began = time.perf_counter()
            history.maintain(t)
            upkeep_s += time.perf_counter() - began
    clock["ms"] = now + MIN
    history.maintain()
    grown = rss() - before
    began = time.perf_counter()
    history.save()
    save_s = time.perf_counter() - began
    snap = history.snapshot_bytes()
    began = time.perf_counter()
    history.at(groups[len(groups) // 2].group_id, now - 90 * MIN)
    at_ms = (time.perf_counter() - began) * 1000
    history.stop()
    fresh = OffsetHistory(TIERS, int(a.hours * 60 * MIN), work, clock_ms=lambda: clock["ms"])
    began = time.perf_counter()
    fresh.load()
    load_s = time.perf_counter() - began
    batch_s.sort()
    parts = a.groups * a.partitions
    kept, nbytes = history.point_count(), history.nbytes()
    p50, p99 = batch_s[len(batch_s) // 2], batch_s[int(len(batch_s) * 0.99)]
    print(f"groups {a.groups} x partitions {a.partitions} = {parts:,}; {len(times)} steps over {a.hours:g} h")
    print(f"points kept            {kept:,} ({kept / parts:.1f} a partition)")
    print(f"history nbytes         {nbytes / 2**20:,.1f} MiB ({nbytes / parts:.1f} B a partition)")
    print(f"RSS growth             {grown / 2**20:,.1f} MiB")
    print(f"snapshot file          {snap / 2**10:,.0f} KiB ({snap / parts:.1f} B a partition)")
    print(f"snapshot write / load  {save_s:.2f} s / {load_s:.2f} s")
    print(f"on_batch, {BATCH} groups  p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    print(f"upkeep (maintain)      {upkeep_s:.1f} s in all")
    print(f"one at() answer        {at_ms:.2f} ms")


if __name__ == "__main__":
    main()
