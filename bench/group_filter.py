"""Cost of the group allow/deny filter in the prepare step (``mapInArrow``), one core.

    .venv/bin/python -m bench.group_filter [--records 300000] [--spark-batch 10000] [--repeat 5]

Runs `streaming.pipeline.prepare`'s decode + collapse + pack over bench/decode.py's dataset (Spark
sized batches), without a filter and with `GroupFilter` (a deny regex, an allow regex, both),
and prints the median CPU seconds of each and the overhead.  CPU time of this process
(``time.process_time``): the machine is shared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa

from bench.decode import dataset
from streaming.pipeline.prepare import GroupFilter, decode_collapse_pack, make_decode_collapse_pack

Step = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def run(step: Step, batches: list[pa.RecordBatch], repeat: int) -> tuple[float, int, int]:
    times = []
    kept = groups = 0
    for _ in range(repeat):
        t0 = time.process_time()
        out = list(step(iter(batches)))
        times.append(time.process_time() - t0)
        groups = sum(b.num_rows for b in out)
        kept = sum(sum(1 for p in b.column("packed").to_pylist() if p) for b in out)
    return statistics.median(times), groups, kept


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=300_000)
    p.add_argument("--spark-batch", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    whole, _ = dataset(args.records)
    batches = [whole.slice(lo, args.spark_batch) for lo in range(0, whole.num_rows, args.spark_batch)]
    cases: list[tuple[str, Step]] = [
        ("no filter", decode_collapse_pack),
        ("deny r'.*-1\\d*'", make_decode_collapse_pack(GroupFilter(None, r".*-1\d*"))),
        ("allow r'[a-m].*'", make_decode_collapse_pack(GroupFilter(r"[a-m].*", None))),
        ("allow + deny", make_decode_collapse_pack(GroupFilter(r"[a-m].*", r".*-1\d*"))),
    ]
    base = None
    print(f"{args.records} records in batches of {args.spark_batch}, median of {args.repeat} (CPU s)")
    for name, step in cases:
        secs, groups, kept = run(step, batches, args.repeat)
        base = base or secs
        print(
            f"{name:>18}: {secs:.3f}s  ({(secs / base - 1) * 100:+.1f}%)  "
            f"{groups} packed group rows, {kept} kept"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
