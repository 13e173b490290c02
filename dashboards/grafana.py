"""A small Grafana dashboard builder: plain dicts in Grafana's dashboard JSON model (schemaVersion 39,
Grafana 10/11), only the fields we set, deterministic output.

Why not grafana-foundation-sdk: it is the better choice for large dashboard estates, but its PyPI
releases are epoch-versioned per Grafana schema (pinning churn for a build-time artifact) and emit
every default field; three dashboards of ~20 panels read better as the few dicts below, and the
tests check the structure Grafana needs (uids, datasource variable, grid, targets) themselves.

Every metric name goes through `metric()`, which refuses names outside the catalogue.
"""

from __future__ import annotations

import json
from typing import Any

from streaming.serving.catalogue import SAMPLE_NAMES

DATASOURCE: dict[str, str] = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39
GRID_WIDTH = 24

#: state -> (code, colour) for state timelines (the code is what the PromQL below computes)
STATE_CODES: dict[str, tuple[int, str]] = {
    "Empty": (1, "orange"),
    "Assigning": (2, "blue"),
    "Reconciling": (3, "purple"),
    "Stable": (4, "green"),
    "NotReady": (5, "red"),
}


def metric(name: str) -> str:
    if name not in SAMPLE_NAMES:
        raise KeyError(f"{name} is not in streaming.serving.catalogue")
    return name


def sel(name: str, **matchers: str) -> str:
    """``name{cluster_name=~"$cluster", k="v", ...}``; a value starting with ``~`` is a regex."""
    parts = ['cluster_name=~"$cluster"']
    for k, v in matchers.items():
        parts.append(f'{k}=~"{v[1:]}"' if v.startswith("~") else f'{k}="{v}"')
    return f"{metric(name)}{{{','.join(parts)}}}"


def state_code(selector_matchers: dict[str, str], by: str = "cluster_name, group") -> str:
    """One series per group whose value encodes its current state (`STATE_CODES`), for state
    timelines: the state gauge is 1 for exactly one state of each group."""
    terms = [
        f"(({sel('coordinator_mirror_group_state', state=state, **selector_matchers)} == 1) * {code})"
        for state, (code, _) in STATE_CODES.items()
    ]
    return f"max by ({by}) (\n  " + "\n  or ".join(terms) + "\n)"


def state_mappings() -> list[dict[str, Any]]:
    return [
        {
            "type": "value",
            "options": {
                str(code): {"text": state, "color": colour, "index": i}
                for i, (state, (code, colour)) in enumerate(STATE_CODES.items())
            },
        }
    ]


# ----------------------------------------------------------------------------------- targets
def target(expr: str, legend: str = "", *, instant: bool = False, table: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend or "__auto"}
    if instant or table:
        t.update({"instant": True, "range": False})
    else:
        t.update({"instant": False, "range": True})
    if table:
        t["format"] = "table"
    return t


# ----------------------------------------------------------------------------------- panels
def _panel(  # noqa: PLR0917 - a private constructor, called positionally by its five wrappers
    kind: str,
    title: str,
    targets: list[dict[str, Any]],
    description: str,
    w: int,
    h: int,
    unit: str,
    options: dict[str, Any],
    defaults: dict[str, Any] | None = None,
    overrides: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    for i, t in enumerate(targets):
        t["refId"] = chr(ord("A") + i)
    field_defaults: dict[str, Any] = {"unit": unit}
    field_defaults.update(defaults or {})
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"h": h, "w": w, "x": 0, "y": 0},
        "targets": targets,
        "fieldConfig": {"defaults": field_defaults, "overrides": overrides or []},
        "options": options,
    }


def timeseries(
    title: str,
    targets: list[dict[str, Any]],
    description: str,
    *,
    unit: str = "short",
    w: int = 12,
    h: int = 8,
    stack: bool = False,
    bars: bool = False,
    overrides: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    custom: dict[str, Any] = {
        "drawStyle": "bars" if bars else "line",
        "fillOpacity": 30 if bars or stack else 10,
    }
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    return _panel(
        "timeseries",
        title,
        targets,
        description,
        w,
        h,
        unit,
        {
            "legend": {
                "showLegend": True,
                "displayMode": "table",
                "placement": "right",
                "calcs": ["lastNotNull", "max"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        {"custom": custom},
        overrides,
    )


def stat(
    title: str,
    targets: list[dict[str, Any]],
    description: str,
    *,
    unit: str = "short",
    w: int = 4,
    h: int = 4,
    mappings: list[dict[str, Any]] | None = None,
    thresholds: list[tuple[float | None, str]] | None = None,
    text_mode: str = "auto",
) -> dict[str, Any]:
    steps = [{"color": c, "value": v} for v, c in (thresholds or [(None, "blue")])]
    return _panel(
        "stat",
        title,
        targets,
        description,
        w,
        h,
        unit,
        {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background" if thresholds else "value",
            "graphMode": "none",
            "textMode": text_mode,
            "justifyMode": "auto",
            "orientation": "auto",
        },
        {
            "mappings": mappings or [],
            "thresholds": {"mode": "absolute", "steps": steps},
            "color": {"mode": "thresholds"},
        },
    )


def bargauge(
    title: str,
    targets: list[dict[str, Any]],
    description: str,
    *,
    unit: str = "short",
    w: int = 8,
    h: int = 8,
) -> dict[str, Any]:
    return _panel(
        "bargauge",
        title,
        targets,
        description,
        w,
        h,
        unit,
        {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "orientation": "horizontal",
            "displayMode": "gradient",
            "showUnfilled": True,
        },
        {"color": {"mode": "palette-classic"}},
    )


def table(
    title: str,
    targets: list[dict[str, Any]],
    description: str,
    *,
    unit: str = "short",
    w: int = 12,
    h: int = 8,
    hide: tuple[str, ...] = ("Time",),
    rename: dict[str, str] | None = None,
    sort_by: str | None = None,
    desc: bool = False,
) -> dict[str, Any]:
    p = _panel(
        "table",
        title,
        targets,
        description,
        w,
        h,
        unit,
        {"showHeader": True, "sortBy": [{"displayName": sort_by, "desc": desc}] if sort_by else []},
    )
    p["transformations"] = [
        {
            "id": "organize",
            "options": {"excludeByName": dict.fromkeys(hide, True), "renameByName": rename or {}},
        }
    ]
    return p


def ranked(
    title: str,
    expr: str,
    description: str,
    *,
    column: str,
    unit: str = "short",
    w: int = 12,
    h: int = 8,
    hide: tuple[str, ...] = ("Time",),
    desc: bool = True,
) -> dict[str, Any]:
    """A table of one instant query: a row per series, its value in ``column``, sorted by it."""
    return table(
        title,
        [target(expr, table=True)],
        description,
        unit=unit,
        w=w,
        h=h,
        hide=hide,
        rename={"Value": column, "cluster_name": "cluster"},
        sort_by=column,
        desc=desc,
    )


def state_timeline(
    title: str, targets: list[dict[str, Any]], description: str, *, w: int = 24, h: int = 8
) -> dict[str, Any]:
    return _panel(
        "state-timeline",
        title,
        targets,
        description,
        w,
        h,
        "none",
        {
            "mergeValues": True,
            "showValue": "auto",
            "alignValue": "left",
            "rowHeight": 0.9,
            "legend": {"showLegend": True, "displayMode": "list", "placement": "bottom"},
            "tooltip": {"mode": "single", "sort": "none"},
        },
        {
            "mappings": state_mappings(),
            "color": {"mode": "thresholds"},
            "thresholds": {"mode": "absolute", "steps": [{"color": "grey", "value": None}]},
        },
    )


def row(title: str) -> dict[str, Any]:
    return {
        "type": "row",
        "title": title,
        "collapsed": False,
        "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": 0},
        "panels": [],
    }


def layout(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ids in order and grid positions left to right, wrapping at 24 columns; rows start a line."""
    x = y = line_h = 0
    for i, p in enumerate(panels, start=1):
        p["id"] = i
        pos = p["gridPos"]
        if p["type"] == "row" or x + pos["w"] > GRID_WIDTH:
            x, y, line_h = 0, y + line_h, 0
        pos["x"], pos["y"] = x, y
        x += pos["w"]
        line_h = max(line_h, pos["h"])
        if p["type"] == "row":
            x, y, line_h = 0, y + pos["h"], 0
    return panels


# ----------------------------------------------------------------------------------- variables
def datasource_variable() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "refresh": 1,
        "regex": "",
        "options": [],
    }


def query_variable(
    name: str, label: str, query: str, *, multi: bool, include_all: bool, hide: int = 0
) -> dict[str, Any]:
    v: dict[str, Any] = {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "current": {},
        "hide": hide,
        "refresh": 2,
        "regex": "",
        "sort": 1,
        "multi": multi,
        "includeAll": include_all,
        "options": [],
    }
    if include_all:
        v["allValue"] = ".*"
    return v


def cluster_variable() -> dict[str, Any]:
    return query_variable(
        "cluster",
        "Cluster",
        f"label_values({metric('coordinator_mirror_ready')}, cluster_name)",
        multi=True,
        include_all=True,
    )


def prometheus_annotation(name: str, expr: str, title: str, text: str, colour: str) -> dict[str, Any]:
    return {
        "name": name,
        "datasource": DATASOURCE,
        "enable": True,
        "hide": False,
        "iconColor": colour,
        "expr": expr,
        "step": "$__interval",
        "titleFormat": title,
        "textFormat": text,
        "tagKeys": "cluster_name,group",
        "useValueForTime": False,
    }


def dashboard(
    uid: str,
    title: str,
    description: str,
    panels: list[dict[str, Any]],
    variables: list[dict[str, Any]],
    *,
    annotations: list[dict[str, Any]] | None = None,
    time_from: str = "now-6h",
) -> dict[str, Any]:
    builtin = {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["kafka", "coordinator-mirror"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": "30s",
        "time": {"from": time_from, "to": "now"},
        "timezone": "browser",
        "links": [
            {
                "type": "dashboards",
                "title": "coordinator-mirror",
                "tags": ["coordinator-mirror"],
                "asDropdown": True,
                "includeVars": True,
                "keepTime": True,
            }
        ],
        "annotations": {"list": [builtin, *(annotations or [])]},
        "templating": {"list": variables},
        "panels": layout(panels),
    }


def to_json(obj: dict[str, Any]) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
