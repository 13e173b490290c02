"""PromQL helpers for the observability tests: the queries of the generated dashboards and rules,
Grafana variable substitution, and the metric names an expression selects (parsed with
promql-parser, not a regex)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promql_parser
import yaml

REPO = Path(__file__).resolve().parents[2]
GRAFANA_DIR = REPO / "dashboards" / "grafana"
RULES_FILE = REPO / "dashboards" / "prometheus" / "alerts.yaml"

#: what the live test (and name extraction) substitutes for Grafana's built-in variables
BUILTINS = {"$__rate_interval": "15s", "$__interval": "5s", "$__range": "3m"}


@dataclass(frozen=True)
class Query:
    dashboard: str
    where: str  # panel title / annotation name / variable name
    expr: str
    kind: str  # "panel", "annotation", "variable"
    panel_id: int | None = None
    instant: bool = False


def dashboards() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(GRAFANA_DIR.glob("*.json"))}


def panels(dash: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


def dashboard_queries(dash: dict[str, Any], name: str) -> Iterator[Query]:
    for p in panels(dash):
        for t in p.get("targets", []):
            yield Query(name, p["title"], t["expr"], "panel", p["id"], bool(t.get("instant")))
    for a in dash["annotations"]["list"]:
        if "expr" in a:
            yield Query(name, a["name"], a["expr"], "annotation")
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            yield Query(name, v["name"], v["definition"], "variable")


def rule_queries() -> Iterator[Query]:
    for group in yaml.safe_load(RULES_FILE.read_text())["groups"]:
        for rule in group["rules"]:
            yield Query("alerts.yaml", rule["alert"], rule["expr"], "rule")


def substitute(expr: str, variables: dict[str, str]) -> str:
    """Grafana variables -> values (longest names first: ``$__range`` before ``$__r...``)."""
    values = {**BUILTINS, **{f"${k}": v for k, v in variables.items()}}
    for key in sorted(values, key=len, reverse=True):
        expr = expr.replace(key, values[key])
    return expr


_LABEL_VALUES = re.compile(
    r"^label_values\((?:(?P<selector>.+),\s*)?(?P<label>[a-zA-Z_][a-zA-Z0-9_]*)\)$", re.S
)


def label_values(definition: str) -> tuple[str | None, str]:
    """Grafana's ``label_values(selector, label)`` -> (selector or None, label)."""
    m = _LABEL_VALUES.match(definition.strip())
    assert m is not None, definition
    return m.group("selector"), m.group("label")


def metric_names(expr: str) -> set[str]:
    """Every metric name an expression selects."""
    if expr.strip().startswith("label_values("):
        selector, _ = label_values(expr)
        return metric_names(selector) if selector else set()
    names: set[str] = set()

    def walk(node: Any) -> None:
        kind = type(node).__name__
        if kind == "VectorSelector":
            if node.name:
                names.add(node.name)
            for m in node.matchers.matchers if hasattr(node.matchers, "matchers") else ():
                if m.name == "__name__":
                    names.add(m.value)
            return
        if kind == "MatrixSelector":
            walk(node.vector_selector)
            return
        for attr in ("expr", "lhs", "rhs", "param"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)
        for arg in getattr(node, "args", None) or ():
            walk(arg)

    walk(promql_parser.parse(substitute(expr, {"cluster": "x", "group": "g", "datasource": "d"})))
    return names
