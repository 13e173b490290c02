"""The lag history's memory and CPU for a large cluster (`streaming.health.lag_history`).

    .venv/bin/python -m bench.lag_history [--groups 10000] [--partitions 50] [--minutes 60]
        [--interval 10] [--mode idle|busy|both]

Builds ``--groups`` real groups (`lab.synthetic`: 80% Stable classic, 15% Empty classic, 5%
KIP-848, on a few shared topics, as groups share topics in a real cluster) into a real
`LagTracker`, attaches a `LagHistory` and applies rounds of log offsets on a simulated clock
``--interval`` seconds apart until the horizon
(``--minutes``) is full, plus two minutes.  Modes:

* ``idle``: every log end stays where it is, the groups behind by a fixed amount (computed each
  round -- a group behind is -- with the same values: the same row object);
* ``busy``: every log end moves at every round by a random amount and a tenth of the groups commit
  (a new view) -- every row is computed and differs from the previous one, the worst case.

Prints, per mode: the rounds, CPU seconds per round of the history's listener (median, max: the
tracker's own round is timed apart), the packed bytes it holds (`LagHistory.stored_bytes`), the
process's RSS growth from before the first round to the end (the history, plus what the tracker's
lookup tables grow by over the same rounds: printed apart from a run without the history), and
the cost of reading one group's history (``GET /groups/{id}/history``'s body).  Each mode runs in
a child process of its own, so the RSS figures do not mix.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def run(
    mode: str, groups: int, partitions: int, *, minutes: int, interval_s: float, with_history: bool
) -> dict[str, Any]:
    import gc

    from lab.synthetic import synthetic_groups
    from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
    from streaming.health.lag_history import LagHistory

    rnd = random.Random(7)
    tracker = LagTracker()
    built = list(synthetic_groups(groups, partitions))
    tracker.apply_groups((g.group_id, g) for g in built)
    # every log end 5-500 messages past the offsets committed to it
    ends: dict[tuple[str, int], int] = {}
    for g in built:
        for (t, p), e in g.offsets.items():
            tp = (tracker.name_of(t), p)
            ends[tp] = max(ends.get(tp, 0), e[0] + rnd.randrange(5, 500))
    history = LagHistory(tracker, minutes, interval_s) if with_history else None
    if history is not None:
        # the history's own CPU: wrap its listener
        listener = tracker.listeners[-1]
        spent: list[float] = []

        def timed(r: Any) -> None:
            started = time.process_time()
            listener(r)
            spent.append(time.process_time() - started)

        tracker.listeners[-1] = timed
    committers = [g for i, g in enumerate(built) if i % 10 == 1]
    gc.collect()
    before = rss()
    now = 1_700_000_000_000
    rounds = int((minutes + 2) * 60 / interval_s)
    round_cpu: list[float] = []
    for n in range(rounds):
        now += int(interval_s * 1000)
        if mode == "busy":
            for tp in ends:
                ends[tp] += rnd.randrange(1, 200)
            changed = []
            for g in committers:
                g2 = g.copy()
                for tp, e in list(g2.offsets.items()):
                    g2.offsets[tp] = (e[0] + 100 * n + rnd.randrange(0, 100), *e[1:])
                changed.append((g2.group_id, g2))
            tracker.apply_groups(changed)
        started = time.process_time()
        tracker.apply_round(LogOffsets(now, {tp: PartitionEnds(0, v, v) for tp, v in ends.items()}))
        round_cpu.append(time.process_time() - started)
    gc.collect()
    after = rss()
    out: dict[str, Any] = {
        "mode": mode,
        "history": with_history,
        "rounds": rounds,
        "rss_growth": after - before,
        "round_cpu_median": statistics.median(round_cpu),
    }
    if history is not None:
        out["listener_cpu_median"] = statistics.median(spent)
        out["listener_cpu_max"] = max(spent)
        out["stored_bytes"] = history.stored_bytes()
        out["computed_last_round"] = history.last_computed
        gid = built[1].group_id
        started = time.perf_counter()
        body = json.dumps(history.series(gid), separators=(",", ":")).encode()
        out["read_ms"] = (time.perf_counter() - started) * 1000
        out["read_bytes"] = len(body)
        out["points"] = len(json.loads(body)["times_ms"])
    return out


def mb(n: float) -> str:
    return f"{n / 2**20:,.1f} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--mode", choices=["idle", "busy", "both"], default="both")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "HISTORY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, with_history = args.child[0], args.child[1] == "1"
        figures = run(
            mode,
            args.groups,
            args.partitions,
            minutes=args.minutes,
            interval_s=args.interval,
            with_history=with_history,
        )
        print(json.dumps(figures))
        return 0
    modes = ["idle", "busy"] if args.mode == "both" else [args.mode]
    print(
        f"{args.groups:,} groups x {args.partitions} partitions, horizon {args.minutes} min, "
        f"a round every {args.interval:g} s"
    )
    for mode in modes:
        results = {}
        for with_history in (False, True):
            cmd = [sys.executable, "-m", "bench.lag_history", "--groups", str(args.groups),
                   "--partitions", str(args.partitions), "--minutes", str(args.minutes),
                   "--interval", str(args.interval),
                   "--child", mode, "1" if with_history else "0"]  # fmt: skip
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            results[with_history] = json.loads(done.stdout.strip().splitlines()[-1])
        h, base = results[True], results[False]
        growth = h["rss_growth"] - base["rss_growth"]
        n = args.groups
        print(f"\n[{mode}] {h['rounds']} rounds")
        print(f"  history listener CPU a round: median {h['listener_cpu_median']:.3f} s, "
              f"max {h['listener_cpu_max']:.3f} s (groups computed at the last round: "
              f"{h['computed_last_round']:,}); the tracker's round without it: median "
              f"{base['round_cpu_median']:.3f} s")  # fmt: skip
        print(f"  packed bytes held: {mb(h['stored_bytes'])} ({h['stored_bytes'] / n:,.0f} B a group)")
        print(f"  RSS growth over the rounds: {mb(h['rss_growth'])} with the history, "
              f"{mb(base['rss_growth'])} without: the history {mb(growth)} "
              f"({growth / n:,.0f} B a group)")  # fmt: skip
        print(f"  one group's history: {h['points']} points, {h['read_bytes']:,} bytes of JSON, "
              f"{h['read_ms']:.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
