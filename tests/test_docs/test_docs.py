"""The docs an operator reads: a short README, docs/ pages whose tables are generated from the code
(settings, metrics, dashboards, alerts, classified errors) and never stale, a runbook section for
every alert that every runbook_url resolves to, and links that lead somewhere."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from dashboards.panels import DASHBOARDS
from dashboards.rules import RUNBOOK_URL, alert_names, rule_groups
from streaming.app import errors
from streaming.serving.catalogue import CATALOGUE
from streaming.settings import Settings
from tests.support.docs import heading_anchors

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"
RULES_FILE = REPO / "dashboards" / "prometheus" / "alerts.yaml"


def _generator() -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) < 200, len(lines)
    # the operator's path: what it is and replaces, three commands, a secured cluster, Helm, links
    text = README.read_text()
    for heading in (
        "## What it replaces",
        "## Three commands",
        "## Point it at your cluster",
        "## On Kubernetes",
    ):
        assert heading in text
    [header] = [ln for ln in lines if ln.startswith("| | coordinator-mirror |")]
    for peer in ("Burrow", "kafka-lag-exporter", "KMinion", "kafka_exporter"):
        assert f"| {peer} |" in header, peer


def test_generated_tables_are_up_to_date() -> None:
    generate = _generator()
    assert generate.main(["--check"]) == 0, "run: python docs/generate.py"  # type: ignore[attr-defined]


def test_every_setting_metric_dashboard_alert_and_error_is_documented() -> None:
    operating = (DOCS / "operating.md").read_text()
    monitoring = (DOCS / "monitoring.md").read_text()
    troubleshooting = (DOCS / "troubleshooting.md").read_text()
    assert not [n for n in Settings.model_fields if f"| `{n}` |" not in operating]
    assert not [m.name for m in CATALOGUE if f"| `{m.name}` |" not in monitoring]
    assert not [d for d in DASHBOARDS if f"`{d}`" not in monitoring]
    assert not [a for a in alert_names() if f"[`{a}`](runbooks.md#{a.lower()})" not in monitoring]
    assert not [
        c.name for c in (*errors.CAUSES, *errors.SECURITY_CAUSES) if f"| `{c.name}` |" not in troubleshooting
    ]
    # every exit code in the exit code table, every /ready reason in troubleshooting
    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    table = operating.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert not [c for c in codes if f"\n| {c} |" not in table]
    reasons = (
        "waiting for __consumer_offsets",
        "source unavailable",
        "resuming",
        "query restarting",
        "catching up",
    )
    for reason in reasons:
        assert f"`{reason}" in troubleshooting, reason


def test_every_alert_has_a_runbook_and_every_runbook_an_alert() -> None:
    anchors = heading_anchors(DOCS / "runbooks.md")
    alerts = {a.lower() for a in alert_names()}
    runbooks = {a for a in anchors if a != "runbooks"}
    assert alerts - runbooks == set(), "alerts without a runbook section in docs/runbooks.md"
    assert runbooks - alerts == set(), "runbook sections of no alert"
    # each section says what it means, how to confirm it and what to do
    text = (DOCS / "runbooks.md").read_text()
    for section in text.split("\n## ")[1:]:
        assert all(part in section for part in ("**Means.**", "**Confirm.**", "**Do.**")), section[:60]


def test_every_runbook_url_resolves_to_a_heading() -> None:
    anchors = heading_anchors(DOCS / "runbooks.md")
    rules = [r for g in yaml.safe_load(RULES_FILE.read_text())["groups"] for r in g["rules"]]
    assert len(rules) == len(alert_names())
    for rule in rules:
        base, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert base == RUNBOOK_URL == RUNBOOK_URL.split("/blob/main/")[0] + "/blob/main/docs/runbooks.md"
        assert anchor in anchors, rule["alert"]
    assert rule_groups()  # the rendered rules and the file are one (test_dashboards checks the bytes)


def _links(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return re.findall(r"\[([^\]]+)\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_links_resolve(page: Path) -> None:
    for label, target in _links(page):
        if re.match(r"^[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        assert dest.exists(), f"{page.name}: [{label}]({target}) -> no {dest}"
        if anchor and dest.suffix == ".md":
            assert anchor in heading_anchors(dest), (
                f"{page.name}: [{label}]({target}) -> no heading #{anchor}"
            )
