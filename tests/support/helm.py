"""The chart under test and the tools that render and validate it (helm, kubeconform), found where
`make chart-tools` puts them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


CHART = REPO / "helm" / "coordinator-mirror"


VALUES_DIR = REPO / "tests" / "test_helm" / "values"


TOOLS = Path(os.environ.get("COORDINATOR_MIRROR_TOOLS", REPO / ".tools"))


SCHEMAS = TOOLS / "schemas"


#: the Kubernetes releases the rendered manifests are validated against (Makefile KUBE_VERSIONS:
#: the oldest the chart supports -- Chart.yaml kubeVersion -- and the newest schemas shipped)
KUBE_VERSIONS = ("1.27.0", "1.37.0")


RELEASE = "mirror"


NAMESPACE = "kafka-tools"


def tool(name: str) -> str:
    """A tool from .tools/bin (or PATH); fails the test when missing."""
    path = TOOLS / "bin" / name
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    found = shutil.which(name)
    if found:
        return found
    pytest.fail(f"missing test dependency: {name} (run `make chart-tools` or `make setup`)", pytrace=False)


@dataclass(frozen=True)
class Rendered:
    """`helm template` output, parsed."""

    text: str
    docs: list[dict[str, Any]]

    def kinds(self) -> list[str]:
        return sorted(d["kind"] for d in self.docs)

    def get(self, kind: str, name_suffix: str = "") -> dict[str, Any]:
        found = [d for d in self.docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
        assert len(found) == 1, (
            f"expected one {kind} *{name_suffix}, got {[d['metadata']['name'] for d in found]}"
        )
        return found[0]

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def settings_yaml(self) -> str:
        return str(self.get("ConfigMap", "-settings")["data"]["settings.yaml"])


class Helm:
    def __init__(self) -> None:
        self.bin = tool("helm")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
        env["HELM_CACHE_HOME"] = env["HELM_CONFIG_HOME"] = env["HELM_DATA_HOME"] = str(TOOLS / "helm-home")
        return subprocess.run(
            [self.bin, *args], check=False, capture_output=True, text=True, env=env, timeout=60
        )

    @staticmethod
    def _value_args(values: Sequence[str | Path], sets: Sequence[str]) -> list[str]:
        args: list[str] = []
        for v in values:
            args += ["-f", str(VALUES_DIR / v if isinstance(v, str) else v)]
        for s in sets:
            args += ["--set", s]
        return args

    def template(
        self,
        *values: str | Path,
        sets: Sequence[str] = (),
        kube_version: str = KUBE_VERSIONS[-1],
        release: str = RELEASE,
    ) -> subprocess.CompletedProcess[str]:
        return self.run(
            "template", release, str(CHART), "--namespace", NAMESPACE, "--kube-version", kube_version,
            *self._value_args(values, sets),
        )  # fmt: skip

    def render(
        self,
        *values: str | Path,
        sets: Sequence[str] = (),
        kube_version: str = KUBE_VERSIONS[-1],
        release: str = RELEASE,
    ) -> Rendered:
        proc = self.template(*values, sets=sets, kube_version=kube_version, release=release)
        assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
        docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
        return Rendered(proc.stdout, docs)

    def lint(
        self, *values: str | Path, kube_version: str = KUBE_VERSIONS[-1]
    ) -> subprocess.CompletedProcess[str]:
        return self.run(
            "lint", "--strict", str(CHART), "--namespace", NAMESPACE, "--kube-version", kube_version,
            *self._value_args(values, ()),
        )  # fmt: skip


class Kubeconform:
    """kubeconform over the offline schema store (tests/support/k8s_schemas.py)."""

    def __init__(self) -> None:
        self.bin = tool("kubeconform")
        for needed in (SCHEMAS / "kubernetes", SCHEMAS / "crds"):
            if not needed.is_dir():
                pytest.fail(f"missing schema store {needed} (run `make chart-tools`)", pytrace=False)

    def validate(self, manifests: str, kube_version: str) -> list[dict[str, Any]]:
        """Every resource's result (kubeconform -output json -verbose)."""

        proc = subprocess.run(
            [
                self.bin, "-strict", "-summary", "-output", "json", "-verbose",
                "-kubernetes-version", kube_version,
                "-schema-location",
                f"{SCHEMAS}/kubernetes/{{{{ .NormalizedKubernetesVersion }}}}-standalone"
                "{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json",
                "-schema-location",
                f"{SCHEMAS}/crds/{{{{ .Group }}}}/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json",
                "-",
            ],
            check=False, input=manifests, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"kubeconform printed no JSON (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return list(report.get("resources", []))


def _container(rendered: Rendered) -> dict[str, Any]:
    if any(d["kind"] == "SparkApplication" for d in rendered.docs):
        spec = rendered.get("SparkApplication")["spec"]["driver"]["template"]["spec"]
    else:
        spec = rendered.get("Deployment")["spec"]["template"]["spec"]
    [container] = spec["containers"]
    return dict(container)
