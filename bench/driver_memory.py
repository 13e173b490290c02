"""Driver memory of the serving side for a large cluster: store, metrics views, snapshot cache.

    .venv/bin/python -m bench.driver_memory [--groups 10000] [--partitions 50] [--scrapes 10] [--reads 10]

Builds ``--groups`` real groups (typed records folded by `state.replay`, as `bench/series.py`:
80% Stable classic, 15% Empty classic, 5% KIP-848) in a child process and hands their state bytes
and summaries to this process the way the query's sink does (`SnapshotStore.apply`, 1000 groups per
batch).  Then serves them through the real HTTP API (`MirrorHTTPServer` on 127.0.0.1, the real
exporter behind ``/metrics``) while a separate client process does ``--scrapes`` ``GET /metrics``
and ``--reads`` rounds of ``GET /groups/{id}`` of every group (interleaved: scrape, read every
group, scrape, ...).  Prints this process's RSS (VmRSS, and the peak VmHWM) after the imports,
after the store is filled and after the traffic, and the per-group figure; nothing else runs in
this process, so it is the driver's Python memory for the serving side.

Acceptance (issue 12): 10k groups x 50 partitions <= 0.5 GB; 100k groups x 10 partitions <= 1.5 GB.

``--timeline-events N`` (issue 26): then N change events per group go into the store's timeline
(`streaming.serving.timeline`) as the sink hands them over -- a realistic mix: members joining and
leaving with client ids, state changes, rebalances completed and timed, assignment changes with
topic-partitions, offsets expiring -- and the RSS growth is printed per group (0: the timeline off;
the metrics and reads then run with it on).
"""

from __future__ import annotations

import argparse
import http.client
import json
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

BATCH = 1000


def rss() -> tuple[int, int]:
    """(VmRSS, VmHWM) of this process in bytes."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(rest.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def mb(n: float) -> str:
    return f"{n / 2**20:,.0f} MB"


# ------------------------------------------------------------------------------ child: build groups
def generate(path: str, groups: int, partitions: int) -> None:
    from lab.synthetic import STATE_SETTINGS, synthetic_groups
    from state import codec
    from state.snapshot import summary

    rows = []
    for g in synthetic_groups(groups, partitions):
        rows.append((g.group_id, codec.encode(g), summary(g, STATE_SETTINGS)))
    with open(path, "wb") as f:
        pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)


# ------------------------------------------------------------------------------ child: HTTP client
def client(url: str, ids_path: str, scrapes: int, reads: int, threads: int) -> None:
    host, port = url.removeprefix("http://").split(":")
    ids = json.loads(Path(ids_path).read_text())
    out: dict[str, Any] = {"scrape_s": [], "scrape_bytes": 0, "read_rounds_s": [], "reads": 0, "errors": 0}

    def get(conn: http.client.HTTPConnection, path: str, close: bool = False) -> bytes:
        conn.request("GET", path, headers={"Connection": "close"} if close else {})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            out["errors"] += 1
        return body

    def read_slice(part: list[str]) -> None:
        # a connection per read: the server writes headers and body in two sends, so a keep-alive
        # client waits out the 40 ms delayed ACK on every response
        for gid in part:
            conn = http.client.HTTPConnection(host, int(port), timeout=600)
            get(conn, "/groups/" + quote(gid, safe=""), close=True)
            conn.close()

    scrape_conn = http.client.HTTPConnection(host, int(port), timeout=600)
    for i in range(max(scrapes, reads)):
        if i < scrapes:
            t0 = time.perf_counter()
            body = get(scrape_conn, "/metrics")
            out["scrape_s"].append(time.perf_counter() - t0)
            out["scrape_bytes"] = len(body)
        if i < reads:
            t0 = time.perf_counter()
            workers = [threading.Thread(target=read_slice, args=(ids[k::threads],)) for k in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            out["read_rounds_s"].append(time.perf_counter() - t0)
            out["reads"] += len(ids)
    print(json.dumps(out))


# ------------------------------------------------------------------------------ timelines
def fill_timelines(store: Any, ids: list[str], per_group: int) -> None:
    """``per_group`` events per group, as the sink adds them (one batch's events at a time)."""
    import uuid

    from state import events as ev

    for gid in ids:
        members = [f"consumer-{gid}-{i}-{uuid.uuid4()}" for i in range(4)]
        events: list[dict[str, Any]] = []
        k = 0
        while len(events) < per_group:
            m = members[k % 4]
            src = (k % 50, 1_000_000 + k, 1_790_000_000_000 + k * 1000)
            batch = [
                ev.MemberJoined(gid, *src, member_id=m, client_id=f"{gid}-client", client_host="/10.1.2.3"),
                ev.StateChanged(gid, *src, before="Stable", after="Empty", since_ms=src[2]),
                ev.RebalanceCompleted(gid, *src, before=k, after=k + 1),
                ev.RebalanceTimed(
                    gid,
                    *src,
                    kind="classic",
                    generation=k + 1,
                    assigned_ms=src[2] - 40,
                    stable_ms=src[2],
                    members=4,
                    joined=(m,),
                    joined_count=1,
                ),
                ev.AssignmentChanged(gid, *src, member_id=m, added=(f"{gid}.t0:{k % 10}",), removed=()),
                ev.MemberLeft(gid, *src, member_id=m, client_id=f"{gid}-client"),
                ev.OffsetsExpired(
                    gid, None, None, None, count=2, partitions=(f"{gid}.t1:0", f"{gid}.t1:1"), at_ms=src[2]
                ),
            ]
            events += [e.to_json() for e in batch]
            k += 1
        store.timeline.add(events[:per_group])


# ------------------------------------------------------------------------------ the driver
def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=50)
    p.add_argument("--scrapes", type=int, default=10)
    p.add_argument("--reads", type=int, default=10, help="rounds of GET /groups/{id} of every group")
    p.add_argument("--threads", type=int, default=2, help="client connections reading groups")
    p.add_argument("--timeline-events", type=int, default=0, help="change events per group in the timeline")
    p.add_argument("--generate", help=argparse.SUPPRESS)
    p.add_argument("--client", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.generate:
        generate(args.generate, args.groups, args.partitions)
        return 0
    if args.client:
        client(args.client[0], args.client[1], args.scrapes, args.reads, args.threads)
        return 0

    # what the driver imports for serving (and nothing of the bench's group building)
    from lab.synthetic import RENDERER, exporter, settings
    from streaming.serving.api import MirrorHTTPServer
    from streaming.serving.metrics import exposition
    from streaming.serving.store import SnapshotStore

    imported, _ = rss()
    tmp = Path(tempfile.mkdtemp(prefix="driver-memory-"))
    data = tmp / "groups.pickle"
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            __file__,
            "--groups",
            str(args.groups),
            "--partitions",
            str(args.partitions),
            "--generate",
            str(data),
        ],
        check=True,
    )
    print(f"built {args.groups:,} groups x {args.partitions} partitions in {time.perf_counter() - t0:.0f}s")

    store = SnapshotStore(renderer=RENDERER, timeline_events=args.timeline_events)
    mirror = exporter(settings(), store)  # the real exporter over this store, as Mirror wires it
    with data.open("rb") as f:
        rows = pickle.load(f)
    ids = [r[0] for r in rows]
    blob_bytes = sum(len(r[1]) for r in rows)
    for batch_id, start in enumerate(range(0, len(rows), BATCH)):
        store.apply(batch_id, rows[start : start + BATCH])
    del rows
    data.unlink()
    filled, _ = rss()
    timeline_rss = None
    if args.timeline_events:
        t0 = time.perf_counter()
        fill_timelines(store, ids, args.timeline_events)
        timeline_rss = rss()[0]
        stored = store.timeline.stored_bytes() / len(ids)
        print(
            f"timelines: {args.timeline_events} events x {len(ids):,} groups in "
            f"{time.perf_counter() - t0:.0f}s, {stored:,.0f} B a group stored"
        )
    ids_path = tmp / "ids.json"
    ids_path.write_text(json.dumps(ids))

    server = MirrorHTTPServer(("127.0.0.1", 0), store, metrics=lambda: exposition(mirror)).start()
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--scrapes",
            str(args.scrapes),
            "--reads",
            str(args.reads),
            "--threads",
            str(args.threads),
            "--client",
            server.url,
            str(ids_path),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    traffic = time.perf_counter() - t0
    server.stop()
    after, peak = rss()
    ids_path.unlink()
    tmp.rmdir()
    res = json.loads(done.stdout)

    n = args.groups
    print(f"state bytes: {mb(blob_bytes)} ({blob_bytes / n:,.0f} B per group)")
    print(f"RSS after imports:        {mb(imported)}")
    print(f"RSS with the store:       {mb(filled)}  (+{(filled - imported) / n / 1024:.1f} KB per group)")
    if timeline_rss is not None:
        print(
            f"RSS with the timelines:   {mb(timeline_rss)}  "
            f"(+{(timeline_rss - filled) / n / 1024:.2f} KB per group for {args.timeline_events} events)"
        )
    print(
        f"RSS after {args.scrapes} scrapes and {args.reads} reads of every group: {mb(after)}  "
        f"(+{(after - imported) / n / 1024:.1f} KB per group over the imports)"
    )
    print(f"RSS peak (VmHWM):         {mb(peak)}")
    scrapes = res["scrape_s"]
    if scrapes:
        print(
            f"GET /metrics: {res['scrape_bytes'] / 1e6:.1f} MB, first {scrapes[0]:.2f}s, "
            f"median {sorted(scrapes)[len(scrapes) // 2]:.2f}s (wall, over HTTP)"
        )
    rounds = res["read_rounds_s"]
    if rounds:
        print(
            f"GET /groups/{{id}}: {res['reads']:,} reads, {traffic:.0f}s of traffic in all; a round of "
            f"every group: first {rounds[0]:.1f}s, median {sorted(rounds)[len(rounds) // 2]:.1f}s"
        )
    if res["errors"]:
        print(f"!! {res['errors']} requests failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
