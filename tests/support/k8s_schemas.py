"""Build the offline schema store kubeconform validates the chart against (run by `make chart-tools`).

kubeconform downloads schemas from GitHub by default; this project's machines and CI reach only
package registries, so the schemas come from packages instead and are rewritten into the two
layouts kubeconform reads with ``-schema-location``::

    <out>/kubernetes/v<K8S>-standalone-strict/<kind>-<group>-<version>.json
        Kubernetes' own kinds, from the PyPI package kubernetes-validate (its "local-strict" schema
        sets, one per Kubernetes release).  They reference a shared ``_definitions.json`` through an
        absolute ``/api/_definitions.json`` URI under a kubernetes.io ``$id``; both are rewritten to
        a relative file reference, or kubeconform would try to fetch kubernetes.io.
    <out>/crds/<group>/<kind>_<version>.json
        * ServiceMonitor, PrometheusRule: the CRDs controller-gen generated in the prometheus-operator
          Go module (``example/prometheus-operator-crd``), openAPIV3Schema -> JSON schema the way
          kubeconform's own openapi2jsonschema does it (strict objects, int-or-string, nullable).
        * SparkApplication (sparkoperator.k8s.io/v1beta2): the Kubeflow Spark Operator publishes no
          Go module the proxy serves, but it publishes its API models on PyPI (kubeflow-spark-api,
          pydantic models generated from the operator's OpenAPI spec); their JSON schema, made strict.

Every object schema that lists properties is closed (``additionalProperties: false``), so a
misspelt field fails validation like ``kubeconform -strict`` does with Kubernetes' own kinds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

PROMETHEUS_CRDS = ("monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml")
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


# ------------------------------------------------------------------------------------- Kubernetes
def _rewrite_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$id":
                continue
            if key == "$ref" and isinstance(value, str) and value.startswith("/api/_definitions.json#"):
                out[key] = value.removeprefix("/api/")
            else:
                out[key] = _rewrite_refs(value)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v) for v in node]
    return node


def kubernetes_schemas(pip_dir: Path, out: Path, versions: list[str]) -> list[Path]:
    root = pip_dir / "kubernetes_validate" / "kubernetes-json-schema"
    written = []
    for version in versions:
        src = root / f"v{version}-local-strict"
        if not src.is_dir():
            have = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
            raise SystemExit(f"no schemas for Kubernetes {version} in {root} (have: {have})")
        dst = out / "kubernetes" / f"v{version}-standalone-strict"
        dst.mkdir(parents=True, exist_ok=True)
        for path in sorted(src.glob("*.json")):
            schema = _rewrite_refs(json.loads(path.read_text()))
            (dst / path.name).write_text(json.dumps(schema, separators=(",", ":")))
        written.append(dst)
    return written


# ------------------------------------------------------------------------------------------- CRDs
def _strict_openapi(node: Any) -> Any:
    """openAPIV3Schema (OpenAPI 3 subset) -> JSON schema, closed where properties are listed."""
    if isinstance(node, list):
        return [_strict_openapi(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: _strict_openapi(v) for k, v in node.items()}
    if node.pop("x-kubernetes-int-or-string", False):
        node.pop("type", None)
        node["anyOf"] = [{"type": "string"}, {"type": "integer"}]
    if node.pop("nullable", False) and isinstance(node.get("type"), str):
        node["type"] = [node["type"], "null"]
    preserve = node.get("x-kubernetes-preserve-unknown-fields", False)
    if "properties" in node and "additionalProperties" not in node and not preserve:
        node["additionalProperties"] = False
    return node


def _crd_schema(version: dict[str, Any], group: str, kind: str, object_meta_ref: str) -> dict[str, Any]:
    schema: dict[str, Any] = _strict_openapi(version["schema"]["openAPIV3Schema"])
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string", "enum": [f"{group}/{version['name']}"]}
    props["kind"] = {"type": "string", "enum": [kind]}
    # The CRD leaves metadata open ({type: object}); validate it as Kubernetes' ObjectMeta.
    props["metadata"] = {"$ref": object_meta_ref}
    schema["additionalProperties"] = False
    return schema


def prometheus_operator_schemas(module_dir: Path, out: Path, object_meta_ref: str) -> list[Path]:
    written = []
    for name in PROMETHEUS_CRDS:
        crd = yaml.safe_load((module_dir / "example" / "prometheus-operator-crd" / name).read_text())
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            path = out / "crds" / group / f"{kind.lower()}_{version['name']}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(_crd_schema(version, group, kind, "../" + object_meta_ref), indent=1))
            written.append(path)
    return written


def _one_of_wrapper(definition: dict[str, Any]) -> dict[str, Any] | None:
    """openapi-generator wraps int-or-string and Quantity in a model with one validator field per
    alternative; the JSON they stand for is just one of those types."""
    props = definition.get("properties", {})
    if "actual_instance" not in props:
        return None
    alternatives = []
    for name, prop in sorted(props.items()):
        if name.startswith("oneof_schema_"):
            alternatives += [a for a in prop.get("anyOf", [prop]) if a.get("type") != "null"]
    return {"description": definition.get("description", ""), "anyOf": alternatives}


def _close_objects(node: Any) -> Any:
    if isinstance(node, list):
        return [_close_objects(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: _close_objects(v) for k, v in node.items() if k != "title"}
    if "properties" in node and "additionalProperties" not in node:
        node["additionalProperties"] = False
    return node


def spark_operator_schema(pip_dir: Path, out: Path) -> Path:
    sys.path.insert(0, str(pip_dir))
    try:
        from kubeflow_spark_api.models.spark_v1beta2_spark_application import (
            SparkV1beta2SparkApplication,
        )
    finally:
        sys.path.remove(str(pip_dir))
    schema = SparkV1beta2SparkApplication.model_json_schema(by_alias=True)
    defs = schema["$defs"]
    for name, definition in list(defs.items()):
        wrapper = _one_of_wrapper(definition)
        if wrapper is not None:
            defs[name] = wrapper
    schema = _close_objects(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["properties"]["apiVersion"] = {"type": "string", "enum": ["sparkoperator.k8s.io/v1beta2"]}
    schema["properties"]["kind"] = {"type": "string", "enum": ["SparkApplication"]}
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind"})
    path = out / "crds" / "sparkoperator.k8s.io" / "sparkapplication_v1beta2.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(schema, indent=1))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="schema store to (re)create")
    parser.add_argument(
        "--pip-dir", type=Path, required=True, help="kubernetes-validate + kubeflow-spark-api"
    )
    parser.add_argument("--kube-versions", required=True, help="space-separated, e.g. '1.27.0 1.37.0'")
    parser.add_argument("--prometheus-operator-dir", type=Path, required=True, help="the Go module's dir")
    args = parser.parse_args(argv)
    versions = args.kube_versions.split()
    if args.out.exists():
        shutil.rmtree(args.out)
    kube_dirs = kubernetes_schemas(args.pip_dir, args.out, versions)
    # CRD files sit at <out>/crds/<group>/; ObjectMeta comes from the newest Kubernetes release.
    object_meta_ref = f"../kubernetes/{kube_dirs[-1].name}/_definitions.json#/$defs/{OBJECT_META}"
    crds = prometheus_operator_schemas(args.prometheus_operator_dir, args.out, object_meta_ref)
    crds.append(spark_operator_schema(args.pip_dir, args.out))
    for d in kube_dirs:
        print(f"kubernetes schemas: {d} ({sum(1 for _ in d.glob('*.json'))} files)")
    for c in crds:
        print(f"CRD schema: {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
