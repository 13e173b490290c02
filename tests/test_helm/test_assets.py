"""The chart's dashboards and alert rules are what dashboards/ generates.

Helm cannot read files outside the chart, so `python -m dashboards.build` (`make dashboards`) also
writes the chart's copies: files/dashboards/*.json (byte for byte dashboards/grafana/*.json) and
files/alert-rules.yaml (the rules of dashboards/prometheus/alerts.yaml with a token where each
threshold goes; templates/prometheusrule.yaml fills them in from values, and
tests/test_helm/test_alerting.py compares the result with the rules file).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from dashboards import build
from tests.support.helm import CHART, REPO

SOURCE_DASHBOARDS = REPO / "dashboards" / "grafana"
CHART_DASHBOARDS = CHART / "files" / "dashboards"
CHART_RULES = CHART / "files" / "alert-rules.yaml"


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.json"))


def test_dashboards_are_copies() -> None:
    assert _names(SOURCE_DASHBOARDS), "dashboards/grafana/ holds the dashboards"
    assert _names(CHART_DASHBOARDS) == _names(SOURCE_DASHBOARDS), "run `make dashboards`"
    for name in _names(SOURCE_DASHBOARDS):
        assert (CHART_DASHBOARDS / name).read_bytes() == (SOURCE_DASHBOARDS / name).read_bytes(), (
            f"{name} drifted from dashboards/grafana/: run `make dashboards`"
        )
        json.loads((CHART_DASHBOARDS / name).read_text())


def test_alert_rule_template_is_generated() -> None:
    assert CHART_RULES.read_text() == build.generated()[CHART_RULES], "run `make dashboards`"
    rules = yaml.safe_load(CHART_RULES.read_text())
    assert isinstance(rules, dict) and isinstance(rules.get("groups"), list), "a Prometheus rules file"
    assert not (CHART / "files" / "alerts.yaml").exists(), "the chart renders the rules from values"
