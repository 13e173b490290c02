"""Series count and scrape cost of the exporter for a large cluster.

    .venv/bin/python -m bench.series [--groups 10000] [--partitions 50] [--registry]

Fills a real `SnapshotStore` with ``--groups`` groups of ``--partitions`` committed offsets each --
real `state` groups (typed records folded by `state.replay`), applied as the query's sink applies
them (state bytes and summary): 80% Stable classic consumer groups (2 members, 2 topics), 15% Empty
classic groups whose offsets are on their way to expiry, 5% KIP-848 groups -- and renders
``/metrics`` with per-partition series on, off, and filtered to 10% of the groups by
``metrics_group_regex``.  For each: the series count, the bytes, the first scrape (every group new
to the exporter: what a scrape costs when every group changed since the last one) and the best of
three repeat scrapes (no group changed), wall clock and, in brackets, this process's CPU time (the
machine may be shared).  ``--registry`` also times prometheus_client's ``generate_latest`` over the
tests' oracle collector (lab/metrics_oracle.py).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable

from lab.synthetic import (
    RENDERER,
    STATE_SETTINGS,
    exporter,
    settings,
    synthetic_groups,
)
from state import codec
from state.snapshot import summary
from streaming.serving.metrics import exposition
from streaming.serving.store import SnapshotStore


def timed(fn: Callable[[], bytes]) -> tuple[bytes, float, float]:
    """(result, wall seconds, CPU seconds) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=50)
    p.add_argument("--registry", action="store_true", help="also time generate_latest(registry_for(...))")
    args = p.parse_args()

    t0 = time.perf_counter()
    store = SnapshotStore(renderer=RENDERER)
    store.apply(
        0,
        (
            (g.group_id, codec.encode(g), summary(g, STATE_SETTINGS))
            for g in synthetic_groups(args.groups, args.partitions)
        ),
    )
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
        f"{'case':24} {'series':>10} {'MB':>7} {'first scrape (CPU)':>19} {'repeat (CPU)':>15}"
        + ("  registry" if args.registry else "")
    )
    body = b""
    for name, overrides in cases:
        mirror = exporter(settings(**overrides), store)  # the real exporter, as Mirror wires it
        scrape = lambda: exposition(mirror)[0]  # noqa: B023, E731
        _, first_wall, first_cpu = timed(scrape)
        repeats = [timed(scrape) for _ in range(3)]
        body = repeats[-1][0]
        series = mirror.last_series
        line = (
            f"{name:24} {series:>10,} {len(body) / 1e6:>7.1f} {first_wall:>11.2f}s ({first_cpu:.2f}s)"
            f" {min(r[1] for r in repeats):>7.2f}s ({min(r[2] for r in repeats):.2f}s)"
        )
        if args.registry:
            from prometheus_client import generate_latest

            from lab.metrics_oracle import registry_for

            line += f"  {timed(lambda: generate_latest(registry_for(mirror)))[1]:7.2f}s"  # noqa: B023
        print(line)
    per_group = sum(1 for line in body.decode().splitlines() if line.startswith("coordinator_mirror_group_"))
    print(
        f"per-group series: {per_group / len(store):.1f} per group (states of its kind, info, counters, ...)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
