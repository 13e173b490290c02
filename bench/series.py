"""Series count and scrape cost of the exporter for a large cluster.

    .venv/bin/python bench/series.py [--groups 10000] [--partitions 50] [--registry]

Fills a real `SnapshotStore` with ``--groups`` groups of ``--partitions`` committed offsets each --
real `state` groups (typed records folded by `state.replay`, then `state.snapshot`): 80% Stable
classic consumer groups (2 members, 2 topics), 15% Empty classic groups whose offsets are on their
way to expiry, 5% KIP-848 groups -- and renders ``/metrics`` with per-partition series on, off, and
filtered to 10% of the groups by ``metrics_group_regex``.  For each: the series count, the bytes,
the first scrape (every group's view built: what a scrape costs when every group changed since the
last one) and a repeat scrape (no group changed).  ``--registry`` also times prometheus_client's
``generate_latest(registry_for(mirror))``.  ``--http`` also times a whole ``GET /metrics`` over
loopback (per-partition on): through the API server (uvicorn + Starlette), plain and gzip, and
through a minimal ``http.server`` handler serving the same body -- the server the API ran on
before, as the baseline in the same run.  Wall-clock seconds on a shared machine: expect noise.
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client import generate_latest  # noqa: E402

from streaming.serving.api import MirrorHTTPServer  # noqa: E402
from streaming.serving.metrics import exposition, metrics_for, registry_for  # noqa: E402
from tests.test_observability.synthetic import FakeMirror, filled_store, settings  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=50)
    p.add_argument("--registry", action="store_true", help="also time generate_latest(registry_for(...))")
    p.add_argument("--http", action="store_true", help="also time GET /metrics over loopback (see above)")
    p.add_argument("--rounds", type=int, default=3, help="--http: scrapes per server, best reported")
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
    if args.http:
        http_scrapes(FakeMirror(settings(metrics_per_partition=True), store), args.rounds)
    return 0


class _Baseline(BaseHTTPRequestHandler):
    """The old API server's /metrics path: ThreadingHTTPServer, one write of the rendered body."""

    protocol_version = "HTTP/1.1"
    render: Any = None

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body, content_type = self.render()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _scrape(url: str, gzip: bool) -> tuple[float, int]:
    """One GET by curl, a separate process like Prometheus (a client thread in this process would
    contend for the GIL with the server's threads and measure that instead): (seconds, bytes)."""
    argv = ["curl", "-sS", "-o", "/dev/null", "-w", "%{time_total} %{size_download}", url]
    if gzip:
        argv[1:1] = ["-H", "Accept-Encoding: gzip"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True).stdout.split()
    return float(out[0]), int(out[1])


def http_scrapes(mirror: Any, rounds: int) -> None:
    """Best of ``rounds`` repeat scrapes (warm views) per server, interleaved so that machine noise
    hits both alike."""
    render = lambda: exposition(mirror)  # noqa: E731
    handler = type("Handler", (_Baseline,), {"render": staticmethod(render)})
    old = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=old.serve_forever, daemon=True).start()
    new = MirrorHTTPServer(("127.0.0.1", 0), mirror.store, metrics=render).start()
    old_url = f"http://127.0.0.1:{old.server_address[1]}/metrics"
    cases = {"http.server (before)": (old_url, False), "uvicorn (after)": (f"{new.url}/metrics", False),
             "uvicorn, gzip (after)": (f"{new.url}/metrics", True)}  # fmt: skip
    render()  # warm the views
    best: dict[str, tuple[float, int]] = {}
    for _ in range(rounds):
        for name, (url, gz) in cases.items():
            took, size = _scrape(url, gz)
            if name not in best or took < best[name][0]:
                best[name] = (took, size)
    old.shutdown()
    new.stop()
    base = best["http.server (before)"][0]
    print(f"\nGET /metrics over loopback, best of {rounds} (per-partition on, warm views):")
    for name, (took, size) in best.items():
        print(f"  {name:24} {took:6.2f}s  {size / 1e6:7.1f} MB on the wire  {took / base:5.2f}x")


if __name__ == "__main__":
    sys.exit(main())
