"""Series count and scrape cost of the exporter for a large cluster.

    .venv/bin/python bench/series.py [--groups 10000] [--partitions 50] [--registry]

Fills a real `SnapshotStore` with ``--groups`` groups of ``--partitions`` committed offsets each --
real `state` groups (typed records folded by `state.replay`, then `state.snapshot`): 80% Stable
classic consumer groups (2 members, 2 topics), 15% Empty classic groups whose offsets are on their
way to expiry, 5% KIP-848 groups -- and renders ``/metrics`` with per-partition series on, off, and
filtered to 10% of the groups by ``metrics_group_regex``.  For each: the series count, the bytes,
the first scrape (every group's view built: what a scrape costs when every group changed since the
last one) and a repeat scrape (no group changed).  ``--registry`` also times prometheus_client's
``generate_latest(registry_for(mirror))``.  Wall-clock seconds on a shared machine: expect noise.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client import generate_latest  # noqa: E402

from streaming.serving.metrics import exposition, metrics_for, registry_for  # noqa: E402
from tests.test_observability.synthetic import FakeMirror, filled_store, settings  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=50)
    p.add_argument("--registry", action="store_true", help="also time generate_latest(registry_for(...))")
    args = p.parse_args()

    t0 = time.perf_counter()
    store = filled_store(args.groups, args.partitions)
    print(
        f"store: {len(store)} groups x {args.partitions} partitions "
        f"({args.groups * args.partitions:,} committed offsets), built in {time.perf_counter() - t0:.1f}s"
    )
    gc.collect()
    cases: list[tuple[str, dict[str, object]]] = [
        ("per-partition on", {"metrics_per_partition": True}),
        ("per-partition off", {"metrics_per_partition": False}),
        ("regex: 10% of groups", {"metrics_group_regex": r"^group-\d{4}0$"}),
    ]
    print(
        f"{'case':24} {'series':>10} {'MB':>7} {'first scrape':>13} {'repeat':>8}"
        + ("  registry" if args.registry else "")
    )
    for name, overrides in cases:
        mirror = FakeMirror(settings(**overrides), store)
        t0 = time.perf_counter()
        body, _ = exposition(mirror)
        first = time.perf_counter() - t0
        repeats = []
        for _ in range(3):
            t0 = time.perf_counter()
            body, _ = exposition(mirror)
            repeats.append(time.perf_counter() - t0)
        series = metrics_for(mirror).last_series
        line = f"{name:24} {series:>10,} {len(body) / 1e6:>7.1f} {first:>12.2f}s {min(repeats):>7.2f}s"
        if args.registry:
            t0 = time.perf_counter()
            generate_latest(registry_for(mirror))
            line += f"  {time.perf_counter() - t0:7.2f}s"
        print(line)
    per_group = sum(1 for line in body.decode().splitlines() if line.startswith("coordinator_mirror_group_"))
    print(
        f"per-group series: {per_group / len(store):.1f} per group (states of its kind, info, counters, ...)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
