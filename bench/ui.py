"""The web UI at scale (issue 37): the groups page at 10k and 100k groups and a group page with 50
partitions and a full timeline, opened in Debian's Chromium.

    .venv/bin/python -m bench.ui [--groups 10000 100000] [--partitions 10] [--runs 3]

A real `MirrorHTTPServer` serves the UI over a real `SnapshotStore` of `lab.synthetic` groups (80%
Stable classic, 15% Empty, 5% KIP-848) with lag fed through the real tracker and Burrow evaluator
(`lab.synthetic.feed_lag`) and a lag history, as `streaming.app.cluster_mirror` wires them.  For
each population: the time from navigation to the first page of rows drawn (the page's own
``performance.now()`` when the first row is in the DOM), to a sorted page (by lag, descending),
to a filtered page (a name fragment), and the bytes the browser received (bodies and headers, every
request of the page: HTML, scripts, CSS, JSON).  Then one group with ``--group-partitions``
partitions and ``--timeline-events`` change events: navigation to its partitions table and its
timeline drawn, and its bytes.  A fresh browser context per run (no cache); medians of ``--runs``.

Figures are printed; nothing is asserted.  Needs Debian's chromium (``make test-tools``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.driver_memory import fill_timelines
from lab.synthetic import (
    RENDERER,
    exporter,
    feed_lag,
    stable_classic,
    synthetic_groups,
    to_store_row,
    tracker_of,
)
from lab.synthetic import settings as mirror_settings
from streaming.health.lag_history import LagHistory
from streaming.serving.api import MirrorHTTPServer
from streaming.serving.burrow import lag_route
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.serving.ui import UiContext

BIG = "big-group-50"


@contextmanager
def serving(n_groups: int, partitions: int, big_partitions: int, events: int) -> Iterator[MirrorHTTPServer]:
    """The HTTP server over ``n_groups`` synthetic groups, their lag measured twice, and one group
    of ``big_partitions`` partitions with ``events`` change events."""
    groups = [*synthetic_groups(n_groups, partitions), stable_classic(BIG, big_partitions)]
    store = SnapshotStore(renderer=RENDERER, timeline_events=max(events, 1))
    store.apply(0, (to_store_row(g) for g in groups))
    fill_timelines(store, [BIG], events)
    mirror = exporter(mirror_settings(), store)
    lag, burrow = tracker_of(mirror)
    history = LagHistory(lag, 60, 10.0)
    feed_lag(mirror, groups)
    status = MirrorStatus()
    status.set_targets({}, {0: 1})
    status.advance({0: 1})
    srv = MirrorHTTPServer(
        ("127.0.0.1", 0),
        store,
        status=status,
        cluster_name="bench",
        lag_route=lambda path: lag_route(lag, burrow, path, int(time.time() * 1000)),
        history=history,
        statuses=lambda: burrow.watcher.groups,
        ui=UiContext(lag_interval_s=10.0),
    ).start()
    try:
        yield srv
    finally:
        srv.stop()


class Visit:
    """One page in a fresh context: the bytes every response brought (bodies and headers)."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.requests: list[Any] = []
        self.page.on("requestfinished", self._finished)  # a method: Playwright tags its handlers

    def _finished(self, request: Any) -> None:
        self.requests.append(request)

    def received(self) -> int:
        total = 0
        for r in self.requests:
            sizes = r.sizes()
            total += sizes["responseBodySize"] + sizes["responseHeadersSize"]
        return total

    def close(self) -> None:
        self.context.close()


def _ms_since_navigation(page: Any) -> float:
    return float(page.evaluate("() => performance.now()"))


def groups_page(browser: Any, url: str) -> dict[str, float]:
    v = Visit(browser)
    try:
        v.page.goto(f"{url}/ui/groups", wait_until="commit")
        v.page.wait_for_selector("#groups tbody tr[data-group-id]", timeout=120_000)
        first = _ms_since_navigation(v.page)
        v.page.wait_for_load_state("networkidle")
        first_bytes = v.received()
        out = {"first_rows_ms": first, "bytes": first_bytes}
        for name, action in (
            ("sorted_ms", lambda: v.page.click("#groups thead th[data-sort='lag'] button")),
            ("filtered_ms", lambda: v.page.fill("#f-q", "group-0042")),
        ):
            before = v.page.evaluate("() => document.querySelector('#groups tbody').innerHTML")
            t0 = time.perf_counter()
            action()  # type: ignore[no-untyped-call]
            v.page.wait_for_function(
                "old => document.querySelector('#groups tbody').innerHTML !== old",
                arg=before,
                timeout=120_000,
            )
            out[name] = (time.perf_counter() - t0) * 1000
        return out
    finally:
        v.close()


def group_page(browser: Any, url: str) -> dict[str, float]:
    v = Visit(browser)
    try:
        v.page.goto(f"{url}/ui/group?id={BIG}", wait_until="commit")
        v.page.wait_for_selector("#partitions-table table", timeout=120_000)
        v.page.wait_for_selector("#timeline-events li", timeout=120_000)
        drawn = _ms_since_navigation(v.page)
        v.page.wait_for_load_state("networkidle")
        rows = v.page.eval_on_selector_all("#partitions-table tbody tr", "rows => rows.length")
        return {"drawn_ms": drawn, "bytes": v.received(), "partition_rows": rows}
    finally:
        v.close()


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--partitions", type=int, default=10, help="partitions per synthetic group")
    ap.add_argument("--group-partitions", type=int, default=50)
    ap.add_argument("--timeline-events", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("bench.ui needs Debian's chromium (make test-tools)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            for n in args.groups:
                t0 = time.perf_counter()
                with serving(n, args.partitions, args.group_partitions, args.timeline_events) as srv:
                    built = time.perf_counter() - t0
                    lists = [groups_page(browser, srv.url) for _ in range(args.runs)]
                    pages = [group_page(browser, srv.url) for _ in range(args.runs)]
                print(
                    f"{n:,} groups x {args.partitions} (built in {built:.0f} s), medians of {args.runs}:\n"
                    f"  groups page: first rows {_median(lists, 'first_rows_ms'):,.0f} ms, "
                    f"{_median(lists, 'bytes') / 1024:,.0f} KiB received; sorted by lag "
                    f"{_median(lists, 'sorted_ms'):,.0f} ms, "
                    f"filtered by name {_median(lists, 'filtered_ms'):,.0f} ms\n"
                    f"  group page ({args.group_partitions} partitions, {args.timeline_events} events): "
                    f"drawn {_median(pages, 'drawn_ms'):,.0f} ms, {_median(pages, 'bytes') / 1024:,.0f} KiB "
                    f"({int(pages[0]['partition_rows'])} partition rows)",
                    flush=True,
                )
        finally:
            browser.close()


if __name__ == "__main__":
    main()
