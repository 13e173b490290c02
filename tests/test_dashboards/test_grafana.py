"""The Grafana builder (`dashboards.grafana`): metric names checked against the catalogue, selectors
per cluster with exact and regex matchers, the state code every state timeline maps, targets, the
grid layout (left to right, wrapping at 24 columns, rows on a line of their own), the dashboard
shell, deterministic JSON."""

from __future__ import annotations

import json

import pytest

from dashboards.grafana import (
    GRID_WIDTH,
    SCHEMA_VERSION,
    STATE_CODES,
    dashboard,
    layout,
    metric,
    row,
    sel,
    state_code,
    state_mappings,
    target,
    to_json,
)


def test_builder_refuses_unknown_metrics() -> None:
    with pytest.raises(KeyError):
        metric("coordinator_mirror_group_lag")
    with pytest.raises(KeyError):
        sel("kafka_consumergroup_group_lag_total")


def test_selectors_are_per_cluster_with_exact_and_regex_matchers() -> None:
    assert sel("coordinator_mirror_group_info") == 'coordinator_mirror_group_info{cluster_name=~"$cluster"}'
    assert sel("coordinator_mirror_group_info", group="$group", kind="~consumer|share") == (
        'coordinator_mirror_group_info{cluster_name=~"$cluster",group="$group",kind=~"consumer|share"}'
    )
    assert metric("kafka_consumergroup_group_lag") == "kafka_consumergroup_group_lag"


def test_the_state_code_and_its_mappings_agree() -> None:
    expr = state_code({"group": "$group"})
    assert expr.startswith("max by (cluster_name, group) (")
    for state, (code, _) in STATE_CODES.items():
        term = f'coordinator_mirror_group_state{{cluster_name=~"$cluster",state="{state}",group="$group"}}'
        assert f"(({term} == 1) * {code})" in expr, state
    (mapping,) = state_mappings()
    assert {int(k): v["text"] for k, v in mapping["options"].items()} == {
        c: s for s, (c, _) in STATE_CODES.items()
    }


@pytest.mark.parametrize(
    ("kwargs", "instant", "fmt"),
    [({}, False, None), ({"instant": True}, True, None), ({"table": True}, True, "table")],
)
def test_targets(kwargs: dict[str, bool], instant: bool, fmt: str | None) -> None:
    t = target("up", **kwargs)
    assert (t["instant"], t["range"], t.get("format")) == (instant, not instant, fmt)
    assert t["legendFormat"] == "__auto" and target("up", "{{group}}")["legendFormat"] == "{{group}}"


def _panel(w: int, h: int = 4) -> dict[str, object]:
    return {"type": "timeseries", "gridPos": {"w": w, "h": h, "x": -1, "y": -1}}


def test_layout_wraps_at_the_grid_width_and_rows_take_a_line() -> None:
    panels = layout([_panel(12), _panel(8, h=6), _panel(8), row("Next"), _panel(24, h=3), _panel(6)])
    assert [p["id"] for p in panels] == [1, 2, 3, 4, 5, 6]
    positions = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in panels]  # type: ignore[index]
    # 12 + 8 fit; 8 more wraps below the taller of the two (6); the row starts a line of its own
    assert positions == [(0, 0), (12, 0), (0, 6), (0, 10), (0, 11), (0, 14)]
    assert all(p["gridPos"]["x"] + p["gridPos"]["w"] <= GRID_WIDTH for p in panels)  # type: ignore[index]


def test_the_dashboard_shell_and_its_json() -> None:
    d = dashboard("uid-1", "Title ü", "what it shows", [_panel(24)], [], annotations=[{"name": "x"}])
    assert (d["uid"], d["schemaVersion"], d["refresh"]) == ("uid-1", SCHEMA_VERSION, "30s")
    assert [a["name"] for a in d["annotations"]["list"]] == ["Annotations & Alerts", "x"]
    assert d["panels"][0]["id"] == 1
    text = to_json(d)
    assert text.endswith("}\n") and "Title ü" in text  # UTF-8 as is
    assert json.loads(text) == d and to_json(json.loads(text)) == text  # deterministic
