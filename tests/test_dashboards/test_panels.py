"""The dashboards (`dashboards.panels`, and the insights dashboard of `dashboards.insights`) as
generated: well-formed for Grafana (ids, a grid without overlaps, the data source and cluster
variables on every query), what each dashboard opens with, and every query naming only series the
exporter has -- with every family shown or alerted on somewhere."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from dashboards.grafana import GRID_WIDTH, STATE_CODES
from dashboards.insights import INSIGHTS_UID
from dashboards.panels import DASHBOARDS, DETAIL_UID, HEALTH_UID, OVERVIEW_UID, TOPIC_UID
from streaming.serving.catalogue import CATALOGUE, SAMPLE_NAMES
from tests.support.promql import dashboard_queries, dashboards, metric_names, panels, rule_queries


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboard_structure(name: str) -> None:
    dash = dashboards()[name]
    assert dash["uid"] in {OVERVIEW_UID, DETAIL_UID, TOPIC_UID, HEALTH_UID, INSIGHTS_UID}
    assert len(dash["uid"]) <= 40 and re.fullmatch(r"[a-z0-9-]+", dash["uid"])
    assert dash["title"] and dash["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    assert variables["cluster"]["type"] == "query"
    if dash["uid"] == DETAIL_UID:
        assert variables["group"]["type"] == "query" and not variables["group"]["multi"]
    ids = [p["id"] for p in panels(dash)]
    assert len(ids) == len(set(ids))
    occupied: set[tuple[int, int]] = set()
    for p in panels(dash):
        pos = p["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= GRID_WIDTH, (p["title"], pos)
        cells = {
            (x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not cells & occupied, f"{p['title']} overlaps another panel"
        occupied |= cells
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["description"], p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs))
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}"
            assert '$cluster"' in t["expr"], (p["title"], t["expr"])  # every query is per cluster
            if dash["uid"] == DETAIL_UID and p["title"] not in ("Kind · protocol",):
                assert "$group" in t["expr"], (p["title"], t["expr"])
            if dash["uid"] == TOPIC_UID:
                assert '$topic"' in t["expr"], (p["title"], t["expr"])
    for a in dash["annotations"]["list"]:
        if "expr" in a:
            assert a["datasource"]["uid"] == "${datasource}" and "$group" in a["expr"]


def test_overview_opens_with_who_is_lagging() -> None:
    """The first row is lag (what users of kafka-lag-exporter, KMinion and kafka_exporter open
    first), filtered by cluster, group and topic; the per-group panels below follow the group
    filter."""
    dash = dashboards()["consumer-groups-overview.json"]
    rows = [p for p in dash["panels"] if p["type"] == "row"]
    assert rows[0]["title"] == "Who is lagging" and dash["panels"][0] is rows[0]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    for name in ("cluster", "group", "topic"):
        assert variables[name]["multi"] and variables[name]["includeAll"], name
    first_row = dash["panels"][1 : dash["panels"].index(rows[1])]
    titles = {p["title"] for p in first_row}
    assert {"Top groups by lag (seconds)", "Top groups by lag (messages)"} <= titles
    lag_exprs = [t["expr"] for p in first_row for t in p["targets"]]
    assert all('group=~"$group"' in e for e in lag_exprs if "kafka_consumergroup" in e)
    assert any('topic=~"$topic"' in e for e in lag_exprs)
    for p in panels(dash):
        for t in p.get("targets", []):
            for name in metric_names(t["expr"]):
                if "group" in SAMPLE_NAMES[name].labels:
                    assert 'group=~"$group"' in t["expr"], (p["title"], t["expr"])


def test_topic_dashboard_shows_consumers_and_partitions() -> None:
    dash = dashboards()["kafka-topic.json"]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert (
        not variables["topic"]["multi"]
        and "kafka_partition_latest_offset" in variables["topic"]["definition"]
    )
    assert [p["title"] for p in dash["panels"] if p["type"] == "row"] == ["Consumers", "Partitions"]


def test_detail_dashboard_has_change_annotations() -> None:
    detail = dashboards()["consumer-group-detail.json"]
    names = {a["name"] for a in detail["annotations"]["list"]}
    assert {"Rebalances", "State changes", "Members joined or left"} <= names


def test_state_timelines_map_every_state_code() -> None:
    for dash in dashboards().values():
        for p in panels(dash):
            if p["type"] == "state-timeline":
                options = p["fieldConfig"]["defaults"]["mappings"][0]["options"]
                assert {v["text"] for v in options.values()} == set(STATE_CODES)


def test_every_query_names_only_catalogue_series() -> None:
    seen: set[str] = set()
    queries = [q for name, d in dashboards().items() for q in dashboard_queries(d, name)]
    queries += list(rule_queries())
    for q in queries:
        names = metric_names(q.expr)
        assert names or q.kind == "variable", f"{q.dashboard} / {q.where}: selects no metric: {q.expr}"
        unknown = names - set(SAMPLE_NAMES) - {"up"}  # Prometheus' own scrape series (MirrorDown)
        assert not unknown, f"{q.dashboard} / {q.where}: not in the catalogue: {unknown}"
        seen |= names
    # and every series the exporter pays for is shown or alerted on somewhere
    families = {SAMPLE_NAMES[n].name for n in seen if n in SAMPLE_NAMES}
    assert {m.name for m in CATALOGUE} - families == set()


def test_every_series_a_panel_selects_is_filtered_by_the_cluster_variable() -> None:
    """With several clusters mirrored (one process or many), a panel shows the clusters the
    ``cluster`` variable selects and no other: every selector of every dashboard query carries a
    ``cluster_name`` matcher on ``$cluster``."""
    import promql_parser

    from tests.support.promql import substitute

    sentinel = "CLUSTER_SENTINEL"
    unfiltered: list[str] = []

    def selectors(node: Any) -> Iterator[Any]:
        kind = type(node).__name__
        if kind == "VectorSelector":
            yield node
            return
        if kind == "MatrixSelector":
            yield node.vector_selector
            return
        for attr in ("expr", "lhs", "rhs", "param"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                yield from selectors(child)
        for arg in getattr(node, "args", None) or ():
            yield from selectors(arg)

    checked = 0
    for name, d in dashboards().items():
        for q in dashboard_queries(d, name):
            if q.kind == "variable":
                continue
            expr = substitute(q.expr, {"cluster": sentinel, "group": "g", "topic": "t", "datasource": "d"})
            for vs in selectors(promql_parser.parse(expr)):
                matchers = vs.matchers.matchers if hasattr(vs.matchers, "matchers") else ()
                if not any(m.name == "cluster_name" and sentinel in m.value for m in matchers):
                    unfiltered.append(f"{name} / {q.where}: {vs.name}")
                checked += 1
    assert not unfiltered, unfiltered
    assert checked > 100
