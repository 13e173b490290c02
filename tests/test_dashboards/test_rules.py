"""The alert rules through promtool: syntax (`check rules`) and behaviour (`test rules`: every alert
fires on its synthetic series and stays quiet on the near misses), plus threshold overrides."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from dashboards import build
from dashboards.rules import Thresholds, rule_groups, rules_yaml
from tests.support.prometheus import promtool
from tests.support.promql import REPO, RULES_FILE

pytestmark = pytest.mark.prometheus

TESTS_DIR = REPO / "dashboards" / "prometheus" / "tests"


def alert_names() -> list[str]:
    return [r["alert"] for g in rule_groups() for r in g["rules"]]


def test_promtool_checks_the_rules_file() -> None:
    out = promtool("check", "rules", RULES_FILE)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in out.stdout


def test_promtool_unit_tests_pass() -> None:
    files = sorted(TESTS_DIR.glob("*.yaml"))
    assert files
    out = promtool("test", "rules", *files)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAILED" not in out.stdout


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for path in TESTS_DIR.glob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        assert doc["rule_files"] == ["../alerts.yaml"]
        for test in doc["tests"]:
            for case in test.get("alert_rule_test", []):
                (firing if case["exp_alerts"] else quiet).add(case["alertname"])
    names = set(alert_names())
    assert names - firing == set(), "alerts without a firing case"
    assert names - quiet == set(), "alerts without a not-firing case"


def test_a_broken_expectation_fails(tmp_path: Path) -> None:
    """The unit tests can fail: one wrong expected value makes promtool report it."""
    src = (TESTS_DIR / "alerts_test.yaml").read_text()
    assert "completed 10 rebalances" in src
    broken = tmp_path / "tests" / "broken.yaml"
    broken.parent.mkdir()
    broken.write_text(src.replace("completed 10 rebalances", "completed 11 rebalances"))
    shutil.copy(RULES_FILE, tmp_path / "alerts.yaml")
    out = promtool("test", "rules", broken)
    assert out.returncode != 0 and "FAILED" in out.stdout + out.stderr


def test_overridden_thresholds_render_valid_rules(tmp_path: Path) -> None:
    out_file = tmp_path / "alerts.yaml"
    overrides = tmp_path / "thresholds.yaml"
    overrides.write_text("storm_window: 15m\nexpiring_hours: 6\nextra_labels: {team: platform}\n")
    code = build.main(
        [
            "--rules-out", str(out_file), "--thresholds", str(overrides), "--set", "storm_rebalances=12",
            "--set", "disabled=KafkaConsumerRewound,CoordinatorMirrorAbsent",
            "--set", "runbook_url=https://wiki.example.com/runbooks",
        ]
    )  # fmt: skip
    assert code == 0
    text = out_file.read_text()
    assert "increase(coordinator_mirror_group_rebalances_total[15m])) > 12" in text
    assert "coordinator_mirror_group_next_offset_expiry_seconds < 6 * 3600" in text
    rules = [r for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    assert all(r["labels"]["team"] == "platform" for r in rules)
    assert {r["alert"] for r in rules} == set(alert_names()) - {
        "KafkaConsumerRewound",
        "CoordinatorMirrorAbsent",
    }
    assert all(
        r["annotations"]["runbook_url"] == f"https://wiki.example.com/runbooks#{r['alert'].lower()}"
        for r in rules
    )
    check = promtool("check", "rules", out_file)
    assert check.returncode == 0, check.stdout + check.stderr
    # the committed file keeps the defaults
    assert RULES_FILE.read_text() == rules_yaml(Thresholds())


@pytest.mark.parametrize(
    "args",
    [
        ["--set", "storm_window=ten minutes"],
        ["--set", "no_such_threshold=1"],
        ["--set", "storm_rebalances"],
        ["--set", "disabled=KafkaConsumerStoped"],
    ],
)
def test_invalid_overrides_are_refused(tmp_path: Path, args: list[str]) -> None:
    out_file = tmp_path / "alerts.yaml"
    try:
        code = build.main(["--rules-out", str(out_file), *args])
    except SystemExit as exc:
        code = int(str(exc.code)) if str(exc.code).isdigit() else 2
    assert code != 0 and not out_file.exists()
