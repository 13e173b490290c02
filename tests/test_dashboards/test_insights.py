"""The insights dashboard (`dashboards.insights`, issue 26): what only the log tells -- rebalance
durations by phase, commit rhythm, abandoned offsets, share-group delivery -- cluster-wide, then
one group chosen by its own variable."""

from __future__ import annotations

from dashboards.insights import INSIGHTS_UID, insights
from streaming.serving.catalogue import SAMPLE_NAMES, SHARE_METRICS
from tests.support.promql import dashboard_queries, dashboards, metric_names, panels


def test_it_is_the_generated_insights_dashboard() -> None:
    d = insights()
    assert d["uid"] == INSIGHTS_UID
    generated = {name: dash for name, dash in dashboards().items() if dash["uid"] == INSIGHTS_UID}
    assert list(generated.values()) == [d]


def test_one_group_at_a_time_from_the_groups_the_mirror_knows() -> None:
    variables = {v["name"]: v for v in insights()["templating"]["list"]}
    assert list(variables) == ["datasource", "cluster", "group"]
    group = variables["group"]
    assert not group["multi"] and not group["includeAll"]
    assert "coordinator_mirror_group_info" in group["definition"]


def test_it_shows_what_only_the_log_tells() -> None:
    d = insights()
    names = {n for q in dashboard_queries(d, "insights") for n in metric_names(q.expr)}
    families = {SAMPLE_NAMES[n].name for n in names if n in SAMPLE_NAMES}
    assert {
        "coordinator_mirror_rebalance_duration_seconds",
        "coordinator_mirror_group_rebalance_duration_seconds",
        "coordinator_mirror_group_commits_per_second",
        "coordinator_mirror_group_abandoned_lag",
    } <= families
    assert {m.name for m in SHARE_METRICS} & families  # the share-group section
    every = list(panels(d))
    rows = [p["title"] for p in every if p["type"] == "row"]
    assert rows[-1] == "This group ($group)"
    last_row = every[[p["title"] for p in every].index(rows[-1]) + 1 :]
    assert all("$group" in t["expr"] for p in last_row for t in p["targets"])
