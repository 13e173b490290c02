"""The chart's alerting as rendered: the job label is chosen once (metrics Service -> ServiceMonitor
-> PrometheusRule), CoordinatorMirrorDown fires on the series a Prometheus Operator would scrape and
clears again, and the PrometheusRule is dashboards/rules.py's rules with the values' thresholds.

The Prometheus Operator's part is replayed from its scrape-config generator (prometheus-operator
``pkg/prometheus/promcfg.go``, ServiceMonitor endpoints): it keeps the Services the selector
matches in the namespaces of ``namespaceSelector``, labels every target with ``namespace``,
``service``, ``pod``, ``container``, sets ``job`` to the Service's name -- or, with
``spec.jobLabel``, to the value of that Service label --, ``endpoint`` to the port's name, then
applies the endpoint's own relabelings.  Prometheus adds ``instance`` (the address).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboards.rules import RUNBOOK_URL, Thresholds, rule_groups, runbook_anchor
from helm.values_schema import threshold_defaults
from tests.support.helm import CHART, NAMESPACE, Helm, Rendered
from tests.support.prometheus import promtool

#: two releases side by side in one namespace: one whose name contains the chart's (full name =
#: release name), one whose does not (full name = <release>-coordinator-mirror)
RELEASES = ("coordinator-mirror", "payments")
MONITORING = ("monitoring.yaml",)


def operator_target(rendered: Rendered, pod_ip: str) -> dict[str, str]:
    """The labels of the one target the Prometheus Operator derives from the rendered
    ServiceMonitor (what its ``up`` series carries)."""
    sm = rendered.get("ServiceMonitor")
    spec = sm["spec"]
    [endpoint] = spec["endpoints"]
    namespaces = spec.get("namespaceSelector", {}).get("matchNames") or [sm["metadata"]["namespace"]]
    services = [
        s
        for s in rendered.all("Service")
        if NAMESPACE in namespaces
        and spec["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
    ]
    assert len(services) == 1, [s["metadata"]["name"] for s in services]
    [service] = services
    [port] = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    deployment = rendered.get("Deployment")
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    [container] = [
        c for c in pod["spec"]["containers"] if port["targetPort"] in {p["containerPort"] for p in c["ports"]}
    ]
    labels = {
        "namespace": NAMESPACE,
        "service": service["metadata"]["name"],
        "pod": f"{deployment['metadata']['name']}-7d9f8-x2x4q",
        "container": container["name"],
        "job": service["metadata"]["name"],
    }
    job_label = spec.get("jobLabel")
    if job_label and service["metadata"]["labels"].get(job_label):
        labels["job"] = service["metadata"]["labels"][job_label]
    labels["endpoint"] = endpoint["port"]
    for relabel in endpoint.get("relabelings", []):  # only what the chart allows: replace actions
        assert relabel.get("action", "replace").lower() == "replace", relabel
        source = ";".join(labels.get(n, "") for n in relabel.get("sourceLabels", []))
        m = re.fullmatch(relabel.get("regex", "(.*)"), source)
        if m:
            labels[relabel["targetLabel"]] = m.expand(
                relabel.get("replacement", "$1").replace("${1}", r"\1").replace("$1", r"\1")
            )
    labels["instance"] = f"{pod_ip}:{port['targetPort']}"
    return labels


def _series(labels: dict[str, str], name: str = "up") -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _rules_file(rendered: Rendered, path: Path) -> Path:
    path.write_text(yaml.safe_dump({"groups": rendered.get("PrometheusRule")["spec"]["groups"]}))
    return path


def _down_case(tmp_path: Path, rule_files: list[Path], killed: dict[str, str], alive: dict[str, str]) -> Path:
    """promtool unit test: ``killed``'s target answers 5 minutes, is down 10 (a kill -9 and a slow
    restart), answers again; ``alive``'s never stops.  Down (for: 2m) must fire for ``killed`` only
    and clear once it is back."""
    description = (
        f"Prometheus cannot scrape the coordinator mirror ({killed['instance']}, job {killed['job']}) "
        "for 2m: the process is gone or not answering. Nothing watches the groups meanwhile."
    )
    firing = {
        "exp_labels": {**killed, "severity": "critical"},
        "exp_annotations": {
            "summary": "The coordinator mirror is down",
            "description": description,
            "runbook_url": f"{RUNBOOK_URL}#{runbook_anchor('CoordinatorMirrorDown')}",
        },
    }
    test = {
        "rule_files": [str(p) for p in rule_files],
        "evaluation_interval": "30s",
        "tests": [
            {
                "interval": "30s",
                "input_series": [
                    {"series": _series(killed), "values": "1x9 0x19 1x19"},
                    {"series": _series(alive), "values": "1x49"},
                ],
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "CoordinatorMirrorDown", "exp_alerts": []},
                    # down since 5m: pending, not yet firing
                    {"eval_time": "6m", "alertname": "CoordinatorMirrorDown", "exp_alerts": []},
                    {"eval_time": "8m", "alertname": "CoordinatorMirrorDown", "exp_alerts": [firing]},
                    {"eval_time": "14m30s", "alertname": "CoordinatorMirrorDown", "exp_alerts": [firing]},
                    # back since 15m: cleared
                    {"eval_time": "16m", "alertname": "CoordinatorMirrorDown", "exp_alerts": []},
                    {"eval_time": "24m", "alertname": "CoordinatorMirrorDown", "exp_alerts": []},
                ],
            }
        ],
    }
    path = tmp_path / "down_test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    return path


def test_down_fires_after_a_kill_and_clears_under_two_releases(helm: Helm, tmp_path: Path) -> None:
    rendered = {r: helm.render(*MONITORING, release=r) for r in RELEASES}
    targets = {r: operator_target(rendered[r], f"10.0.0.{i + 7}") for i, r in enumerate(RELEASES)}
    # the job the ServiceMonitor gives is the chart's own, not the Service's name
    assert targets["coordinator-mirror"]["job"] == "coordinator-mirror"
    assert targets["payments"]["job"] == "payments-coordinator-mirror"
    files = [_rules_file(rendered[r], tmp_path / f"{r}.yaml") for r in RELEASES]
    for killed, alive in (RELEASES, RELEASES[::-1]):
        case = _down_case(tmp_path, files, targets[killed], targets[alive])
        out = promtool("test", "rules", case)
        assert out.returncode == 0, f"{killed} killed:\n{out.stdout}{out.stderr}"


def test_down_would_never_fire_with_the_services_name_as_job(helm: Helm, tmp_path: Path) -> None:
    """Negative control (the chart before jobLabel): the operator names the job after the metrics
    Service, the rule selects another job, and promtool reports the missing alert."""
    rendered = helm.render(*MONITORING)
    sm = rendered.get("ServiceMonitor")
    del sm["spec"]["jobLabel"]
    target = operator_target(rendered, "10.0.0.7")
    assert target["job"].endswith("-metrics")
    other = {**target, "instance": "10.0.0.8:8080", "pod": "other"}
    case = _down_case(tmp_path, [_rules_file(rendered, tmp_path / "rules.yaml")], target, other)
    out = promtool("test", "rules", case)
    assert out.returncode != 0 and "FAILED" in out.stdout + out.stderr


def test_job_from_values_reaches_service_servicemonitor_and_rule(helm: Helm) -> None:
    rendered = helm.render(*MONITORING, sets=["serviceMonitor.job=kafka-mirror"])
    assert operator_target(rendered, "10.0.0.7")["job"] == "kafka-mirror"
    [down] = [
        r for g in rendered.get("PrometheusRule")["spec"]["groups"] for r in g["rules"]
        if r["alert"] == "CoordinatorMirrorDown"
    ]  # fmt: skip
    assert down["expr"] == f'up{{job="kafka-mirror",namespace="{NAMESPACE}"}} == 0'
    # without the chart's ServiceMonitor the namespace is whatever the user's scrape config gives
    alone = helm.render(sets=["prometheusRule.enabled=true", "serviceMonitor.job=kafka-mirror"])
    rules = {r["alert"]: r for g in alone.get("PrometheusRule")["spec"]["groups"] for r in g["rules"]}
    assert rules["CoordinatorMirrorDown"]["expr"] == 'up{job="kafka-mirror"} == 0'


def test_a_relabelled_job_is_refused(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "relabel.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "serviceMonitor": {
                    "enabled": True,
                    "relabelings": [{"targetLabel": "job", "replacement": "x", "action": "replace"}],
                }
            }
        )
    )
    proc = helm.template(values)
    assert proc.returncode != 0 and "serviceMonitor.job" in proc.stderr


# ------------------------------------------------------------------------ rules from values
OVERRIDES: dict[str, Any] = {
    "thresholds": {
        "storm_rebalances": 12,
        "storm_window": "1h30m",
        "expiring_hours": 0.5,
        "decode_window": "90s",
        "behind_records": 2500000,
        "no_batch_seconds": 45.5,
    },
    "disabled": {
        "KafkaConsumerRewound": True,
        "CoordinatorMirrorAbsent": True,
        "CoordinatorMirrorDown": False,
    },
    "additionalRuleLabels": {"team": "kafka-platform", "severity": "page"},
    "runbookUrl": "https://wiki.example.com/kafka/runbooks",
}


def _chart_rules(helm: Helm, tmp_path: Path, rule_values: dict[str, Any]) -> list[dict[str, Any]]:
    values = tmp_path / "rule-values.yaml"
    values.write_text(yaml.safe_dump({"prometheusRule": {"enabled": True, **rule_values}}))
    return list(helm.render(values).get("PrometheusRule")["spec"]["groups"])


@pytest.mark.parametrize("rule_values", [{}, OVERRIDES], ids=["defaults", "overrides"])
def test_prometheusrule_is_the_rules_file_with_the_values(
    helm: Helm, rule_values: dict[str, Any], tmp_path: Path
) -> None:
    """The chart renders exactly what `python -m dashboards.build --rules-out` renders with the same
    thresholds: one source of rules, two renderers."""
    chart = _chart_rules(helm, tmp_path, rule_values)
    overrides: dict[str, Any] = {
        **rule_values.get("thresholds", {}),
        "disabled": tuple(n for n, off in rule_values.get("disabled", {}).items() if off),
        "extra_labels": rule_values.get("additionalRuleLabels", {}),
        "runbook_url": rule_values.get("runbookUrl", RUNBOOK_URL),
    }
    expected = rule_groups(Thresholds.with_overrides({"job": "mirror-coordinator-mirror", **overrides}))
    assert chart == expected
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": chart}))
    check = promtool("check", "rules", rules)
    assert check.returncode == 0, check.stdout + check.stderr


def test_additional_rules_get_a_group_of_their_own(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "extra.yaml"
    extra = {
        "alert": "KafkaConsumerGroupTooManyMembers",
        "expr": "coordinator_mirror_group_members > 200",
        "for": "10m",
        "labels": {"severity": "warning"},
        "annotations": {"summary": "{{ $labels.group }} has {{ $value }} members"},
    }
    values.write_text(yaml.safe_dump({"prometheusRule": {"enabled": True, "additionalRules": [extra]}}))
    groups = helm.render(values).get("PrometheusRule")["spec"]["groups"]
    assert groups[-1] == {"name": "coordinator-mirror.additional", "rules": [extra]}
    assert [g["name"] for g in groups[:-1]] == [g["name"] for g in rule_groups()]


def test_thresholds_in_values_are_the_rules_defaults() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["prometheusRule"]
    assert values["thresholds"] == threshold_defaults()
    assert values["runbookUrl"] == Thresholds().runbook_url
    assert {f.name for f in dataclasses.fields(Thresholds)} >= set(values["thresholds"])


@pytest.mark.parametrize(
    ("rule_values", "message"),
    [
        ({"thresholds": {"storm_window": "ten minutes"}}, "storm_window"),
        ({"thresholds": {"storm_windw": "10m"}}, "storm_windw"),
        ({"thresholds": {"restarts": -1}}, "restarts"),
        ({"disabled": {"KafkaConsumerStoped": True}}, "KafkaConsumerStoped"),
        ({"additionalRules": [{"alert": "X"}]}, "expr"),
    ],
    ids=["duration", "unknown-threshold", "negative", "unknown-alert", "rule-without-expr"],
)
def test_invalid_rule_values_are_refused(
    helm: Helm, tmp_path: Path, rule_values: dict[str, Any], message: str
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"prometheusRule": {"enabled": True, **rule_values}}))
    proc = helm.template(path)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_unknown_disabled_alert_is_named_without_the_schema(helm: Helm, tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"prometheusRule": {"enabled": True, "disabled": {"Nope": True}}}))
    proc = helm.run("template", "m", str(CHART), "--skip-schema-validation", "-f", str(path))
    assert proc.returncode != 0 and "no alert named Nope" in proc.stderr


def test_every_runbook_url_names_a_section_of_the_runbooks(helm: Helm, tmp_path: Path) -> None:
    """Every alert the chart renders links to a heading docs/runbooks.md has."""
    from tests.support.docs import heading_anchors

    anchors = heading_anchors(CHART.parents[1] / "docs" / "runbooks.md")
    for group in _chart_rules(helm, tmp_path, {}):
        for rule in group["rules"]:
            url = rule["annotations"]["runbook_url"]
            base, _, anchor = url.partition("#")
            assert base == RUNBOOK_URL and anchor in anchors, (rule["alert"], url)
