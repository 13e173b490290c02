"""A small cluster's first minutes (issue 36's "even a small one, once"): in a fresh process, a
mirror on a new checkpoint (the driver folds the backfill), and a commit made the moment it is
ready -- seconds until ``GET /groups/{id}`` shows it, and where batch 0's time went.

    .venv/bin/python -m bench.first_batch [--runs 2] [--groups 11]

One local broker (the lab's KRaft broker, 5 partitions of ``__consumer_offsets``) with ``--groups``
groups of committed offsets; then ``--runs`` rounds, each a fresh ``python -m bench.first_batch
--one`` process per variant, alternated:

* ``default``: the mirror as it ships (no Python worker warm-up while the driver folds);
* ``no-preview``: the setting ``preview`` off (the commit shows when its micro-batch ends);
* ``warm-workers``: the workers warmed while the driver folds, as for a checkpoint the query folds.

``--variants`` picks them (default: ``default no-preview``).

Each prints ready (s from ``Mirror.start``), visible after ready (s), the query's start, and batch
0's and batch 1's Spark durations.  Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

TOPIC = "first-batch-t"
VARIANTS = ("default", "no-preview", "warm-workers")
PARTITIONS = 3


def _commit(bootstrap: str, group: str, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 0}
    )
    try:
        c.commit(offsets=[TopicPartition(TOPIC, p, offset) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        c.close()


def one(bootstrap: str, variant: str) -> dict[str, Any]:
    """One fresh mirror on a new checkpoint (this process's own Spark session)."""
    from streaming.app import cluster_mirror
    from streaming.app.mirror import Mirror
    from streaming.settings import load_settings

    if variant == "warm-workers":
        cluster_mirror.BackfillPart.will_fold = lambda self: False  # type: ignore[method-assign]
    work = Path(tempfile.mkdtemp(prefix="first-batch-"))
    settings = load_settings(
        bootstrap_servers=bootstrap,
        checkpoint_location=str(work / "ckpt"),
        http_port=0,
        **({"preview": False} if variant == "no-preview" else {}),
    )
    began = time.monotonic()
    mirror = Mirror(settings).start()
    try:
        while not mirror.wait_ready(5):
            pass
        ready_s = time.monotonic() - began
        probe = f"first-batch-probe-{int(time.time() * 1000)}"
        committed = time.monotonic()
        _commit(bootstrap, probe, 7)
        url = f"{mirror.http.url}/groups/{probe}"
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        visible_s = time.monotonic() - committed
        time.sleep(1.5)  # batch 1's progress
        query = mirror.query
        assert query is not None
        batches = [json.loads(p.json()) for p in list(query._jsq.recentProgress())[:2]]
        return {
            "variant": variant,
            "ready_s": round(ready_s, 2),
            "visible_after_ready_s": round(visible_s, 2),
            "batches": [
                {"batch_id": b["batchId"], "rows": b["numInputRows"], **b["durationMs"]} for b in batches
            ],
        }
    finally:
        mirror.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--groups", type=int, default=11)
    ap.add_argument(
        "--variants", nargs="+", default=["default", "no-preview"], choices=VARIANTS, help="alternated"
    )
    ap.add_argument("--one", nargs=2, metavar=("BOOTSTRAP", "VARIANT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(*args.one)), flush=True)
        return 0

    from confluent_kafka.admin import AdminClient, NewTopic

    from lab.broker import BrokerSettings, LocalKafka

    broker = LocalKafka(BrokerSettings()).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            f.result(30)
        for g in range(args.groups):
            _commit(broker.bootstrap, f"first-batch-g{g}", 3 + g)
        results: list[dict[str, Any]] = []
        for _ in range(args.runs):
            for variant in args.variants:
                out = subprocess.run(
                    [sys.executable, "-m", "bench.first_batch", "--one", broker.bootstrap, variant],
                    capture_output=True, text=True, check=False, timeout=600,
                )  # fmt: skip
                if out.returncode != 0:
                    print(out.stderr[-3000:], file=sys.stderr)
                    return 1
                results.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(json.dumps(results[-1]), flush=True)
        for variant in args.variants:
            seen = [r["visible_after_ready_s"] for r in results if r["variant"] == variant]
            print(f"{variant}: a commit at ready visible after {min(seen)}-{max(seen)} s ({len(seen)} runs)")
        return 0
    finally:
        broker.cleanup()


if __name__ == "__main__":
    sys.exit(main())
