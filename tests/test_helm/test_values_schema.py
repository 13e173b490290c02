"""The chart's values and their schema (`helm.values_schema`): the values mirror the settings model --
same names, same defaults (or a stated reason) --, the schema's settings part is generated from the
model, and the generator's readers of values.yaml (its ``# --`` comments, its key paths)."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import yaml

from helm import values_schema
from streaming.settings import Settings
from tests.support.helm import CHART, REPO

#: settings whose chart default differs from the model's, and why
CHART_DEFAULTS = {
    "bootstrap_servers": "the model has none (required for source=kafka); the chart needs one to render",
    "checkpoint_location": "the model's var/checkpoint is on the read-only root; the chart's is on the PVC",
    "http_host": "the model binds loopback; probes, Services and Prometheus need all interfaces",
}


def _values() -> dict[str, Any]:
    return dict(yaml.safe_load((CHART / "values.yaml").read_text()))


def _model_default(name: str) -> Any:
    field = Settings.model_fields[name]
    value = field.get_default(call_default_factory=True)
    return str(value) if value is not None and name.endswith("_path") else value


def test_every_setting_has_a_value_and_every_value_a_setting() -> None:
    settings = _values()["settings"]
    assert list(settings) == list(Settings.model_fields), (
        "settings values must list the model's fields in its order"
    )


def test_defaults_match_the_model() -> None:
    settings = _values()["settings"]
    differing = {name for name in Settings.model_fields if settings[name] != _model_default(name)}
    assert differing == set(CHART_DEFAULTS), {n: (settings[n], _model_default(n)) for n in differing}


def test_chart_defaults_are_marked_in_values_yaml() -> None:
    text = (CHART / "values.yaml").read_text()
    for name in CHART_DEFAULTS:
        block = text[: text.index(f"\n  {name}:")]
        assert "CHART:" in block[block.rindex("\n  # --") :], f"{name}: say why the chart's default differs"


def test_values_schema_settings_part_is_generated_from_the_model() -> None:
    assert values_schema.main(["--check"]) == 0, "run: python helm/values_schema.py"
    assert set(values_schema.settings_schema()["properties"]) == set(Settings.model_fields)


def test_versions_agree() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == pyproject["project"]["version"]
    makefile = (REPO / "Makefile").read_text()
    spark = re.search(r"^SPARK_VERSION\s*\?=\s*(\S+)", makefile, re.M)
    assert spark is not None
    assert _values()["sparkApplication"]["sparkVersion"] == spark.group(1)


VALUES_TEXT = """\
# -- The image.
image:
  # -- Where it is pulled from.
  #   registry.example.com/mirror   (an example line: not part of the description)
  repository: coordinator-mirror
  tag: ""
# -- Extra labels
# on two lines.
podLabels: {}

# a comment that is no description
service:
  # -- The port.
  port: 8080
  list:
    - name: x
"""


def test_value_docs_reads_helm_docs_comments() -> None:
    assert values_schema.value_docs(VALUES_TEXT) == {
        "image": "The image.",
        "image.repository": "Where it is pulled from.",
        "podLabels": "Extra labels on two lines.",
        "service.port": "The port.",
    }


def test_value_paths_are_every_key_path() -> None:
    import yaml as _yaml

    assert values_schema.value_paths(_yaml.safe_load(VALUES_TEXT)) == {
        "image", "image.repository", "image.tag", "podLabels", "service", "service.port", "service.list",
    }  # fmt: skip
    assert values_schema.value_paths([1, 2]) == set()


def test_every_value_of_the_chart_is_described() -> None:
    text = (CHART / "values.yaml").read_text()
    docs = values_schema.value_docs(text)
    assert docs and all(docs.values())
    assert set(docs) <= values_schema.value_paths(yaml.safe_load(text))
