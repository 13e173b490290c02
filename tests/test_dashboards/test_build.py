"""`python -m dashboards.build` (`make dashboards`): the committed dashboards, rules and the chart's
copies are what the generator writes; ``--check`` reports a stale file and writes nothing, a run
rewrites it and removes a dashboard no longer generated; the metrics table of docs/monitoring.md is
the catalogue's."""

from __future__ import annotations

from typing import Any

import pytest

from dashboards import build
from dashboards.panels import DASHBOARDS
from streaming.serving.catalogue import CATALOGUE, metrics_table
from tests.support.promql import REPO

MONITORING_DOC = REPO / "docs" / "monitoring.md"
TABLE_BEGIN = "<!-- metrics-table:begin (generated from streaming/serving/catalogue.py) -->"
TABLE_END = "<!-- metrics-table:end -->"


def test_committed_files_are_what_the_generator_writes() -> None:
    for path, content in build.generated().items():
        assert path.exists(), f"{path} missing: run `make dashboards`"
        assert path.read_text() == content, f"{path} differs from the generator: run `make dashboards`"
    assert build.main(["--check"]) == 0
    assert {p.name for p in build.GRAFANA_DIR.glob("*.json")} == set(DASHBOARDS)


def test_check_mode_reports_a_stale_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "alerts.yaml"
    fake.write_text("groups: []\n")
    for name in ("GRAFANA_DIR", "CHART_DASHBOARDS"):
        monkeypatch.setattr(build, name, tmp_path / name)
        (tmp_path / name).mkdir()
    gone = tmp_path / "CHART_DASHBOARDS" / "retired.json"  # a dashboard no longer generated
    gone.write_text("{}")
    monkeypatch.setattr(build, "RULES_FILE", fake)
    monkeypatch.setattr(build, "generated", lambda: {fake: "groups: [x]\n"})
    assert build.main(["--check"]) == 1
    assert fake.read_text() == "groups: []\n" and gone.exists()  # --check writes nothing
    assert build.main([]) == 0 and fake.read_text() == "groups: [x]\n" and not gone.exists()
    assert build.main(["--check"]) == 0


def test_docs_have_exactly_the_generated_metrics_table() -> None:
    text = MONITORING_DOC.read_text()
    assert text.count(TABLE_BEGIN) == 1 and text.count(TABLE_END) == 1, "docs/monitoring.md table markers"
    inside = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0]
    assert inside.strip("\n") == metrics_table().strip("\n"), (
        "docs/monitoring.md metrics table is stale: run python docs/generate.py"
    )
    for m in CATALOGUE:
        assert f"`{m.name}`" in inside
