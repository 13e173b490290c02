"""The web UI (`streaming.serving.ui`) served by a real `MirrorHTTPServer` over a store of real group
state (ids from both base64 alphabets, with ``/``, unicode and HTML) and lag fed through the real
tracker and lag history, opened in Debian's Chromium: the groups list shows exactly what
``GET /groups`` answers and pages as it does, a group page shows the group, an id holding markup is
text and runs nothing, the console stays clean, axe-core finds no violation, the charts' labels
neither overlap nor get cut, and the pages are refused without credentials when the API requires
them.  The same pages against a live mirror on
the test run's broker: tests/test_live/test_ui_live.py."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.synthetic import RENDERER, exporter, feed_lag, stable_classic, to_store_row, tracker_of
from lab.synthetic import settings as mirror_settings
from streaming.health.lag_history import LagHistory
from streaming.serving.api import Credentials, MirrorHTTPServer
from streaming.serving.burrow import lag_route
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.serving.ui import ASSETS_DIR, CONTENT_SECURITY_POLICY, PAGES, UI_DIR, UiContext, load_assets
from tests.support.browser import Page, browser, open_page
from tests.support.http import request

XSS = "<img src=x onerror=alert(1)>"
IDS = [
    XSS,
    "team/orders",
    "a+b/c=",
    "a-b_c",
    "ünïcödé-グループ",
    "100%-done",
    *(f"g{i:03d}" for i in range(120)),
]
UNMEASURED = "not-measured-yet"


@pytest.fixture(scope="module")
def server() -> Iterator[MirrorHTTPServer]:
    groups = [stable_classic(gid, 2) for gid in IDS]
    store = SnapshotStore(renderer=RENDERER)
    # UNMEASURED: held, never measured by a lag round (fed to the store, not to the lag tracker)
    store.apply(0, [to_store_row(g) for g in [*groups, stable_classic(UNMEASURED, 1)]])
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
        cluster_name="synthetic",
        lag_route=lambda path: lag_route(lag, burrow, path, int(time.time() * 1000)),
        history=history,
        statuses=lambda: burrow.watcher.groups,
        ui=UiContext(lag_interval_s=10.0),
    ).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


def _api(server: MirrorHTTPServer, path: str) -> Any:
    status, _, body = request(f"{server.url}{path}")
    assert status == 200, (path, body[:300])
    return json.loads(body)


def _rows(page: Page) -> list[dict[str, str]]:
    page.page.wait_for_selector("#groups tbody tr[data-group-id]")
    rows: list[dict[str, str]] = page.page.eval_on_selector_all(
        "#groups tbody tr[data-group-id]",
        "rows => rows.map(r => Object.fromEntries([...r.cells].map((c, i) => ["
        "r.parentElement.parentElement.tHead.rows[0].cells[i].dataset.sort, c.textContent.trim()])))",
    )
    return rows


def _expected(g: dict[str, Any]) -> dict[str, str]:
    """A row of ``GET /groups`` as the page writes it."""
    return {
        "group_id": g["group_id"],
        "cluster": g["cluster"],
        "kind": g["kind"],
        "state": g["state"],
        "members": str(g["members"]),
        "lag": f"{g['lag']:,}" if g["lag"] is not None else "—",
        "lag_seconds": f"{g['lag_seconds']:.1f}" if g["lag_seconds"] is not None else "—",
        "consumer_status": g["consumer_status"] or "—",
    }


def test_every_asset_is_served_with_the_policy(server: MirrorHTTPServer) -> None:
    assert set(load_assets()) == {
        p.relative_to(ASSETS_DIR).as_posix() for p in ASSETS_DIR.rglob("*") if p.is_file()
    }
    for name in [*PAGES, *(f"assets/{a}" for a in load_assets())]:
        status, headers, body = request(f"{server.url}/ui/{name}")
        assert status == 200 and body, name
        assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY and headers["ETag"]
        again, _, _ = request(f"{server.url}/ui/{name}", headers={"If-None-Match": headers["ETag"]})
        assert again == 304, name
    # a path outside the assets is never read from disk
    for bad in ("assets/../../api.py", "assets/%2e%2e/groups.html", "assets/nope.js", "nope"):
        assert request(f"{server.url}/ui/{bad}")[0] == 404, bad
    assert (UI_DIR / "groups.html").is_file()


def test_ui_config_lists_the_clusters(server: MirrorHTTPServer) -> None:
    cfg = _api(server, "/ui/config")
    assert (
        cfg["cluster"] == "synthetic" and cfg["clusters"] == ["synthetic"] and cfg["lag_interval_s"] == 10.0
    )


def test_the_groups_list_shows_what_the_api_answers_and_pages(
    server: MirrorHTTPServer, chromium: Any
) -> None:
    with open_page(chromium) as page:
        page.page.goto(f"{server.url}/ui/groups")
        shown = _rows(page)
        api = _api(server, "/groups?sort=group_id&order=asc&offset=0&limit=50")
        assert api["total"] == len(IDS) + 1 and len(api["groups"]) == 50  # and UNMEASURED
        assert [{k: r[k] for k in _expected(api["groups"][0])} for r in shown] == [
            _expected(g) for g in api["groups"]
        ]
        assert any(r["lag"] not in ("—", "0") for r in shown)  # the lag history's totals are joined
        page.screenshot("ui-groups")
        # the next page, then a filter: the server's answer each time
        page.page.click("#next")
        page.page.wait_for_selector("#page:has-text('Page 2 of')")
        second = _api(server, "/groups?sort=group_id&order=asc&offset=50&limit=50")["groups"]
        assert [r["group_id"] for r in _rows(page)] == [g["group_id"] for g in second]
        page.page.fill("#f-q", "ORDERS")
        page.page.wait_for_function(
            "document.querySelectorAll('#groups tbody tr[data-group-id]').length == 1"
        )
        assert [r["group_id"] for r in _rows(page)] == ["team/orders"]
        assert "q=ORDERS" in page.page.url
        assert page.errors == [] and page.dialogs == []


def test_an_id_holding_markup_is_text_and_runs_nothing(server: MirrorHTTPServer, chromium: Any) -> None:
    with open_page(chromium) as page:
        page.page.goto(f"{server.url}/ui/groups?q={urllib.parse.quote('<img')}")
        assert [r["group_id"] for r in _rows(page)] == [XSS]
        assert page.page.eval_on_selector_all("#groups img", "imgs => imgs.length") == 0
        page.page.click(f"#groups tbody a:text-is('{XSS}')")
        page.page.wait_for_function("document.querySelector('#title').textContent.includes('<img')")
        assert XSS in page.page.text_content("#title")
        assert page.page.eval_on_selector_all("main img", "imgs => imgs.length") == 0
        assert page.dialogs == [] and page.errors == []


@pytest.mark.parametrize("group_id", ["team/orders", "ünïcödé-グループ", "100%-done"])
def test_a_group_page_shows_the_group(server: MirrorHTTPServer, chromium: Any, group_id: str) -> None:
    snapshot = _api(server, f"/groups/{urllib.parse.quote(group_id, safe='')}")
    with open_page(chromium) as page:
        page.page.goto(f"{server.url}/ui/group?id={urllib.parse.quote(group_id, safe='')}")
        page.page.wait_for_function(
            "id => document.querySelector('#title').textContent.includes(id)", arg=group_id
        )
        page.page.wait_for_selector("#members-table table")
        page.page.wait_for_selector("#partitions-table table")
        members = page.page.text_content("#members-table")
        assert members is not None and snapshot["members"]
        for m in snapshot["members"]:
            assert m["member_id"] in members
        if group_id == "team/orders":
            page.screenshot("ui-group")
        assert page.errors == [] and page.dialogs == []


def test_the_pages_pass_axe(server: MirrorHTTPServer, chromium: Any) -> None:
    with open_page(chromium) as page:
        page.page.goto(f"{server.url}/ui/groups")
        _rows(page)
        assert page.axe() == []
        page.page.goto(f"{server.url}/ui/group?id=team%2Forders")
        page.page.wait_for_selector("#partitions-table table")
        assert page.axe() == []
        assert page.errors == []


def test_the_pages_are_refused_without_credentials(tmp_path: Path, chromium: Any) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    srv = MirrorHTTPServer(
        ("127.0.0.1", 0),
        SnapshotStore(),
        credentials=Credentials.bearer_from_file(token),
        ui=UiContext(),
    ).start()
    try:
        for path in ("/ui/groups", "/ui/group?id=x", "/ui/config", "/ui/assets/common.js"):
            assert request(f"{srv.url}{path}")[0] == 401, path
        with open_page(chromium) as page:
            assert page.page.goto(f"{srv.url}/ui/groups").status == 401
        with open_page(chromium, extra_http_headers={"Authorization": "Bearer s3cret-token"}) as page:
            assert page.page.goto(f"{srv.url}/ui/groups").status == 200
            page.page.wait_for_selector("#groups tbody td.notice")
            assert page.errors == []
    finally:
        srv.stop()


def test_a_held_group_not_measured_yet_has_an_empty_history(server: MirrorHTTPServer, chromium: Any) -> None:
    """A group held but not measured by a lag round yet answers an empty history with its reason
    (a 404 was an error in the group page's console at every refresh); its page says so in words,
    with a clean console; an id not held is still a 404."""
    body = _api(server, f"/groups/{UNMEASURED}/history")
    assert body["times_ms"] == [] and body["lag"] == [] and body["partitions"] == [], body
    assert body["reason"] == "no_lag" and body["group_id"] == UNMEASURED
    status, _, raw = request(f"{server.url}/groups/nobody/history")
    assert status == 404 and json.loads(raw)["reason"] == "unknown"
    with open_page(chromium) as page:
        page.page.goto(f"{server.url}/ui/group?id={UNMEASURED}")
        page.page.wait_for_selector("#group-charts .notice")
        assert "No lag history" in (page.page.text_content("#group-charts") or "")
        page.page.wait_for_selector("[data-field='lag_unavailable']")
        assert "Lag not available" in (page.page.text_content("#lag-figures") or "")
        # the lag routes keep their 404 with its reason until a round measured the group (the lag
        # service and Burrow's clients read it so): the only failed loads
        failed = {e.split(" ", 1)[1] for e in page.errors if e.startswith("404 ")}
        assert failed == {
            f"{server.url}/groups/{UNMEASURED}/lag",
            f"{server.url}/v3/kafka/synthetic/consumer/{UNMEASURED}/lag",
        }, page.errors
        assert all(e.startswith(("404 ", "console: Failed to load resource")) for e in page.errors)
        assert page.dialogs == []


def test_a_held_group_without_events_has_an_empty_timeline(server: MirrorHTTPServer) -> None:
    """The group page asks for every group's timeline: a group held with no event kept answers none
    (a 404 would be an error in the browser's console), an id not held still a 404."""
    assert _api(server, "/groups/a-b_c/timeline")["events"] == []
    assert request(f"{server.url}/groups/nobody/timeline")[0] == 404


def test_every_chart_spans_its_points_or_the_last_hour(server: MirrorHTTPServer, chromium: Any) -> None:
    """A chart's time axis covers its points and little more; one with no point yet spans the last
    hour up to now -- not uPlot's own guess for no data, which drew years (``May 2027 .. May 2029``)
    or 1970 under the group page's commit-rhythm chart."""
    with open_page(chromium) as page:
        page.page.goto(f"{server.url}/ui/group?id=team%2Forders")
        page.page.wait_for_selector("figure.chart[data-chart='rhythm']")
        page.page.wait_for_function(
            "() => [...document.querySelectorAll('figure.chart')].every(f => f.dataset.points !== undefined)"
        )
        now = time.time()
        charts = page.page.eval_on_selector_all(
            "figure.chart",
            "figs => figs.map(f => ({key: f.dataset.chart, min: f.chart.plot.scales.x.min,"
            " max: f.chart.plot.scales.x.max, xs: f.chart.plot.data[0].filter(x => x !== null)}))",
        )
        assert {c["key"] for c in charts} >= {"rhythm"}, charts
        for c in charts:
            xs = c["xs"]
            if not xs:
                assert abs(c["max"] - now) < 120 and abs(c["max"] - c["min"] - 3600) < 1, c
                continue
            assert c["min"] <= min(xs) and c["max"] >= max(xs), c
            assert c["max"] - c["min"] <= max(max(xs) - min(xs), 120) + 1, c
        assert page.errors == []


#: per chart, its axes' labels as uPlot drew them, time labels that run into each other (4 px
#: apart at least) and value axes narrower than their widest label (measured in the axis's font)
_AXES = """figs => figs.map(f => {
  const u = f.chart.plot;
  const ctx = document.createElement("canvas").getContext("2d");
  const out = {key: f.dataset.chart, labels: [], overlaps: [], cut: []};
  u.axes.forEach(a => {
    if (!a.show || !a._values) return;
    ctx.font = a.font[0];
    const width = v => ctx.measureText(String(v)).width / devicePixelRatio;
    const labels = a._values.map((v, j) => [v, a._splits[j]]).filter(([v]) => v !== null && v !== "");
    out.labels.push(labels.map(([v]) => String(v)));
    if (a.side % 2 === 0) {
      const boxes = labels
        .map(([v, s]) => [u.valToPos(s, a.scale), width(v) / 2, v])
        .map(([x, half, v]) => [x - half, x + half, v])
        .sort((p, q) => p[0] - q[0]);
      for (let j = 1; j < boxes.length; j++)
        if (boxes[j][0] < boxes[j - 1][1] + 4) out.overlaps.push([boxes[j - 1][2], boxes[j][2]]);
    } else {
      const widest = Math.max(0, ...labels.map(([v]) => width(v)));
      if (a.ticks.size + a.gap + widest > a._size)
        out.cut.push({labels: labels.map(l => l[0]), size: a._size});
    }
  });
  return out;
})"""

#: long labels on purpose: the group chart's seconds axis up to two minutes ("1 min 40 s") and
#: messages in the millions; the commit-rhythm chart's points 5 s apart for three minutes (time
#: labels with seconds: uPlot's default spacing ran them into each other)
_CRAFTED = """() => {
  const now = Date.now();
  const hour = Array.from({length: 360}, (_, i) => now - (359 - i) * 10000);
  const group = document.querySelector("figure.chart[data-chart='group']").chart;
  group.update(hour, hour.map((_, i) => 12345678 - i * 1000), hour.map((_, i) => 120 - (i % 120)));
  const rhythm = document.querySelector("figure.chart[data-chart='rhythm']").chart;
  // ending at half past a minute, at most a minute ago: the 175 s always hold three whole minutes
  // (ending at any moment, they held two in most minutes, and a run whose chart labelled whole
  // minutes found two labels)
  const end = Math.floor((now - 30000) / 60000) * 60000 + 30000;
  const times = Array.from({length: 36}, (_, i) => end - (35 - i) * 5000);
  rhythm.update(times, times.map((_, i) => 0.2 + (i % 7) / 10));
}"""


def test_chart_labels_never_overlap_nor_get_cut(server: MirrorHTTPServer, chromium: Any) -> None:
    """No two time labels of a chart run into each other, and a value axis is as wide as its widest
    label ("1 min 40 s" was cut by a fixed 58 px right axis): the charts as the page drew them, then
    with data chosen for long labels.  The labels are drawn on a canvas: their boxes are measured
    in the axis's font at the positions uPlot put their ticks."""
    with open_page(chromium, viewport={"width": 1100, "height": 900}) as page:
        page.page.goto(f"{server.url}/ui/group?id=team%2Forders")
        page.page.wait_for_selector("figure.chart[data-chart='group']")
        page.page.wait_for_selector("figure.chart[data-chart='rhythm']")
        for crafted in (False, True):
            if crafted:
                page.page.evaluate(_CRAFTED)
            charts = page.page.eval_on_selector_all("figure.chart", _AXES)
            assert {"group", "rhythm"} <= {c["key"] for c in charts}, charts
            for c in charts:
                assert c["overlaps"] == [] and c["cut"] == [], c
        by_key = {c["key"]: c for c in charts}
        _, messages, seconds = by_key["group"]["labels"]
        assert any("min" in s for s in seconds) and any(len(m) >= len("12,000,000") for m in messages)
        rhythm_times = by_key["rhythm"]["labels"][0]
        assert len(rhythm_times) >= 3 and len(set(rhythm_times)) == len(rhythm_times), rhythm_times
        page.screenshot("ui-chart-labels")
        assert page.errors == []
