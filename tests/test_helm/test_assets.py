"""The chart's dashboards and alert rules are byte-identical copies of dashboards/.

Helm cannot read files outside the chart, so `make chart-assets` copies dashboards/grafana/*.json
to files/dashboards/ and dashboards/prometheus/alerts.yaml to files/alerts.yaml; the PrometheusRule
and the dashboard ConfigMaps are rendered from those copies (tests/test_helm/test_chart.py). Until
dashboards/ holds them the chart carries placeholders, and only what exists is compared.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.test_helm.conftest import CHART, REPO

SOURCE_DASHBOARDS = REPO / "dashboards" / "grafana"
SOURCE_RULES = REPO / "dashboards" / "prometheus" / "alerts.yaml"
CHART_DASHBOARDS = CHART / "files" / "dashboards"
CHART_RULES = CHART / "files" / "alerts.yaml"


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.json"))


def test_dashboards_are_copies() -> None:
    if SOURCE_DASHBOARDS.is_dir() and _names(SOURCE_DASHBOARDS):
        assert _names(CHART_DASHBOARDS) == _names(SOURCE_DASHBOARDS), "run `make chart-assets`"
        for name in _names(SOURCE_DASHBOARDS):
            assert (CHART_DASHBOARDS / name).read_bytes() == (SOURCE_DASHBOARDS / name).read_bytes(), (
                f"{name} drifted from dashboards/grafana/: run `make chart-assets`"
            )
    assert _names(CHART_DASHBOARDS), "the chart ships at least one dashboard"
    for name in _names(CHART_DASHBOARDS):
        json.loads((CHART_DASHBOARDS / name).read_text())


def test_alert_rules_are_a_copy() -> None:
    if SOURCE_RULES.is_file():
        assert CHART_RULES.read_bytes() == SOURCE_RULES.read_bytes(), (
            "files/alerts.yaml drifted from dashboards/prometheus/alerts.yaml: run `make chart-assets`"
        )
    rules = yaml.safe_load(CHART_RULES.read_text())
    assert isinstance(rules, dict) and isinstance(rules.get("groups"), list), "a Prometheus rules file"
    for group in rules["groups"]:
        assert group["name"] and isinstance(group.get("rules"), list)
