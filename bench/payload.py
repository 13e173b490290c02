"""Benchmark of the ``payload`` cell codec (decoders.payload): typed record -> cell -> typed record.

    .venv/bin/python -m bench.payload [--records 20000] [--repeat 3]

Dataset: bench/decode.py's non-commit records (classic consumer groups with members and embedded
subscriptions/assignments, KIP-848 records), decoded once.  Prints records/s for encoding (what
the batch decoder does per non-commit row), decoding (what the fold does per non-commit row) and
the mean cell size.  CPU time of this process (``time.process_time``), best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import random
import time

from bench.decode import other_records
from decoders.decode import decode_record
from decoders.payload import payload_to_record, record_to_payload
from decoders.records import Record, Source


def best(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()  # type: ignore[operator]
        times.append(time.process_time() - t0)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = other_records(args.records, random.Random(7))
    records = []
    for i, (k, v) in enumerate(rows):
        rec = decode_record(k, v, Source(0, i, 0))
        assert isinstance(rec, Record), rec
        records.append(rec)
    cells = [record_to_payload(r) for r in records]
    assert all(payload_to_record(c, r.source) == r for c, r in zip(cells, records, strict=True))
    n = len(records)
    enc = best(lambda: [record_to_payload(r) for r in records], args.repeat)
    sources = [r.source for r in records]
    dec = best(lambda: list(map(payload_to_record, cells, sources)), args.repeat)
    print(f"payload codec: {n:,} non-commit records (bench/decode.py's mix), one core")
    print(f"encode:  {n / enc:,.0f} records/s ({enc / n * 1e6:.1f} us/record)")
    print(f"decode:  {n / dec:,.0f} records/s ({dec / n * 1e6:.1f} us/record)")
    print(f"size:    {sum(map(len, cells)) / n:,.0f} bytes/record")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
