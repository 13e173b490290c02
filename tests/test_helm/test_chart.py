"""The Helm chart: lint, render, validate against Kubernetes' and the CRDs' schemas, check behaviour.

Every case renders with the real helm binary and is validated by kubeconform against the offline
schema store (Kubernetes' own kinds at the oldest and newest supported release, SparkApplication,
ServiceMonitor, PrometheusRule); the settings file each case renders is loaded by the application's
own settings loader, with the environment the pod would get.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.helm import (
    CHART,
    KUBE_VERSIONS,
    NAMESPACE,
    VALUES_DIR,
    Helm,
    Kubeconform,
    Rendered,
    _container,
)

#: valid combinations: values files (none = the chart's defaults)
CASES: dict[str, tuple[str, ...]] = {
    "default": (),
    "deployment-sasl-ssl": ("deployment-sasl-ssl.yaml",),
    "deployment-s3a": ("deployment-s3a.yaml",),
    "spark-s3a": ("spark-s3a.yaml",),
    "monitoring": ("monitoring.yaml",),
    "monitoring+rules": ("monitoring.yaml", "monitoring-rules.yaml"),
    "spark-s3a+monitoring": ("spark-s3a.yaml", "monitoring.yaml"),
    "deployment-extras": ("deployment-extras.yaml",),
    "spark-extras": ("spark-extras.yaml",),
    "http-security": ("http-security.yaml",),
    "http-basic": ("http-basic.yaml",),
    "sasl-ssl+http-security": ("deployment-sasl-ssl.yaml", "http-security.yaml"),
    "spark-s3a+http-security": ("spark-s3a.yaml", "http-security.yaml"),
    "deployment-clusters": ("deployment-clusters.yaml",),
}

#: values that must not deploy, and what the error must name
INVALID: dict[str, str] = {
    "spark-local-checkpoint.yaml": "checkpoint_location",
    "inline-password.yaml": "sasl.jaas.config",
    "inline-truststore-password.yaml": "ssl.truststore.password",
    "inline-s3-secret.yaml": "fs.s3a.secret.key",
    "checkpoint-outside-volume.yaml": "persistence.mountPath",
    "checkpoint-without-volume.yaml": "persistence.enabled",
    "unknown-setting.yaml": "trigger_interval",
    "spark-events-path.yaml": "events_path",
    "http-loopback.yaml": "http_host",
    "no-bootstrap.yaml": "bootstrap_servers",
    "unquoted-option.yaml": "max.poll.records",
    "closed-probes.yaml": "http_open_probes",
    "auth-without-secret.yaml": "httpSecurity.auth.secretName",
    "inline-token-file.yaml": "http_auth_token_file",
    "inline-cluster-password.yaml": "settings.clusters[0].kafka_options.sasl.jaas.config",
}

#: of those, the ones values.schema.json itself rejects
SCHEMA_INVALID = {"spark-local-checkpoint.yaml", "unknown-setting.yaml", "unquoted-option.yaml"}


def _pod_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's environment with every Secret reference replaced by a recognisable value."""
    env = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif "secretKeyRef" in var["valueFrom"]:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = f"<secret {ref['name']}/{ref['key']}>"
    return env


def load_rendered_settings(rendered: Rendered, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The application's own loader on the rendered file, with the CM_* environment of the pod."""
    from streaming.settings import load_settings

    path = tmp_path / "settings.yaml"
    path.write_text(rendered.settings_yaml())
    for name in [n for n in os.environ if n.startswith("CM_")]:
        monkeypatch.delenv(name)
    for name, value in _pod_env(_container(rendered)).items():
        if name.startswith("CM_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("CM_CONFIG_FILE", str(path))  # what the pod sets (restored by monkeypatch)
    return load_settings(config_file=str(path))


# ------------------------------------------------------------------------------ lint and schemas
@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_lint(helm: Helm, case: str, kube_version: str) -> None:
    proc = helm.lint(*CASES[case], kube_version=kube_version)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout
    # clean: not even a recommendation ([INFO] icon is recommended, ...)
    findings = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    assert not findings, findings


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_manifests_match_kubernetes_and_crd_schemas(
    helm: Helm, kubeconform: Kubeconform, case: str, kube_version: str
) -> None:
    rendered = helm.render(*CASES[case], kube_version=kube_version)
    results = kubeconform.validate(rendered.text, kube_version)
    statuses = {f"{r['kind']}/{r['name']}": r["status"] for r in results}
    # every object validated -- none skipped for want of a schema
    assert len(results) == len(rendered.docs), (statuses, rendered.kinds())
    bad = {k: (s, r.get("msg")) for r in results for k, s in [(f"{r['kind']}/{r['name']}", r["status"])]}
    assert all(s == "statusValid" for s in statuses.values()), {
        k: v for k, v in bad.items() if v[0] != "statusValid"
    }


def _nulls(node: Any, path: str = "") -> list[str]:
    if node is None:
        return [path]
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _nulls(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _nulls(v, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("case", list(CASES))
def test_no_null_fields(helm: Helm, case: str) -> None:
    """The schemas accept null for optional fields, but e.g. `emptyDir: null` is a volume without a
    source that the API server rejects: the chart renders no nulls at all."""
    for doc in helm.render(*CASES[case]).docs:
        assert not _nulls(doc), (doc["kind"], _nulls(doc))


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if doc["kind"] == "Deployment":
        return list(doc["spec"]["template"]["spec"]["containers"])
    if doc["kind"] == "SparkApplication":
        return [
            c for role in ("driver", "executor") for c in doc["spec"][role]["template"]["spec"]["containers"]
        ]
    return []


@pytest.mark.parametrize("case", list(CASES))
def test_no_mount_inside_another(helm: Helm, case: str) -> None:
    """A mount point inside a read-only volume (the settings ConfigMap, a Secret) or the read-only
    root cannot be created: every mount path is a sibling of the others."""
    for doc in helm.render(*CASES[case]).docs:
        for container in _containers(doc):
            paths = [m["mountPath"].rstrip("/") + "/" for m in container.get("volumeMounts", [])]
            assert len(set(paths)) == len(paths), paths
            nested = [(a, b) for a in paths for b in paths if a != b and b.startswith(a)]
            assert not nested, (doc["kind"], container["name"], nested)


@pytest.mark.parametrize(
    ("case", "kind", "path"),
    [
        ("default", "Deployment", ["spec", "template", "spec", "containers", 0]),
        ("spark-s3a", "SparkApplication", ["spec", "driver"]),
        ("monitoring", "ServiceMonitor", ["spec", "endpoints", 0]),
        ("monitoring", "PrometheusRule", ["spec"]),
    ],
)
def test_schemas_are_strict(
    helm: Helm, kubeconform: Kubeconform, case: str, kind: str, path: list[Any]
) -> None:
    """Negative control: a misspelt field in any validated kind is reported invalid, so a green
    validation means the manifests were really checked field by field."""
    rendered = helm.render(*CASES[case])
    doc = json.loads(json.dumps(rendered.get(kind)))
    node = doc
    for key in path:
        node = node[key]
    node["misspeltField"] = "x"
    [result] = kubeconform.validate(yaml.safe_dump(doc), KUBE_VERSIONS[-1])
    assert result["status"] == "statusInvalid", result
    assert "misspeltField" in result["msg"]


@pytest.mark.parametrize("values_file", list(INVALID))
def test_invalid_values_fail(helm: Helm, values_file: str) -> None:
    proc = helm.template(VALUES_DIR / "invalid" / values_file)
    assert proc.returncode != 0, f"{values_file} rendered:\n{proc.stdout[:2000]}"
    assert INVALID[values_file] in proc.stderr, proc.stderr
    if values_file in SCHEMA_INVALID:
        # helm lint only logs a template's `fail` (lint mode), but reports schema violations
        lint = helm.lint(VALUES_DIR / "invalid" / values_file)
        assert lint.returncode != 0, lint.stdout


def test_sparkapplication_checkpoint_check_also_in_template(helm: Helm) -> None:
    """values.schema.json rejects a local checkpoint in sparkApplication mode; the template does
    too, with the reason, when schema validation is skipped."""
    proc = helm.run(
        "template", "m", str(CHART), "--skip-schema-validation",
        "-f", str(VALUES_DIR / "invalid" / "spark-local-checkpoint.yaml"),
    )  # fmt: skip
    assert proc.returncode != 0
    assert "executors write the state store" in proc.stderr


def test_secrets_only_by_reference(helm: Helm) -> None:
    """The chart creates no Secret, and every credential variable refers to an existing one."""
    for case, files in CASES.items():
        r = helm.render(*files)
        assert "Secret" not in r.kinds(), case
        env = _container(r).get("env", [])
        for var in env:
            if var["name"].startswith(
                ("CM_KAFKA_OPTIONS__", "CM_OUTPUT_KAFKA_OPTIONS__", "CM_CLUSTERS__", "AWS_")
            ):
                assert "value" not in var and "secretKeyRef" in var["valueFrom"], (case, var)


# ------------------------------------------------------------------------------ settings file
@pytest.mark.parametrize("case", list(CASES))
def test_rendered_settings_load_in_the_application(
    helm: Helm, case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = helm.render(*CASES[case])
    settings = load_rendered_settings(rendered, tmp_path, monkeypatch)
    values = yaml.safe_load((CHART / "values.yaml").read_text())["settings"]
    for f in CASES[case]:
        values.update(yaml.safe_load((VALUES_DIR / f).read_text()).get("settings", {}))
    assert settings.cluster_name == values["cluster_name"]
    assert settings.bootstrap_servers == values["bootstrap_servers"]
    assert settings.checkpoint_location == values["checkpoint_location"]
    assert settings.http_host == "0.0.0.0"
    for option, value in values["kafka_options"].items():
        assert settings.kafka_options[option] == value


def test_secret_kafka_options_reach_the_settings_from_secrets(
    helm: Helm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = helm.render("deployment-sasl-ssl.yaml")
    env = {e["name"]: e for e in _container(rendered)["env"]}
    jaas = env["CM_KAFKA_OPTIONS__SASL_JAAS_CONFIG"]
    assert jaas["valueFrom"]["secretKeyRef"] == {"name": "kafka-client", "key": "sasl.jaas.config"}
    assert "CM_OUTPUT_KAFKA_OPTIONS__SASL_JAAS_CONFIG" in env
    assert "sasl.jaas.config" not in rendered.settings_yaml()
    settings = load_rendered_settings(rendered, tmp_path, monkeypatch)
    # the file's options and the Secret's, merged by the application under their Kafka names
    assert settings.kafka_options == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": "/etc/coordinator-mirror/secrets/kafka-truststore/truststore.p12",
        "sasl.jaas.config": "<secret kafka-client/sasl.jaas.config>",
        "ssl.truststore.password": "<secret kafka-truststore/password>",
    }
    assert settings.output_kafka_options == {"sasl.jaas.config": "<secret kafka-client/sasl.jaas.config>"}
    assert settings.spark_conf["spark.driver.memory"] == "3g"


def test_a_clusters_secret_options_reach_that_clusters_settings(
    helm: Helm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = helm.render("deployment-clusters.yaml")
    env = {e["name"]: e for e in _container(rendered)["env"]}
    jaas = env["CM_CLUSTERS__PROD_EU1__KAFKA_OPTIONS__SASL_JAAS_CONFIG"]
    assert jaas["valueFrom"]["secretKeyRef"] == {"name": "kafka-eu1-client", "key": "sasl.jaas.config"}
    settings = load_rendered_settings(rendered, tmp_path, monkeypatch)
    eu1, us1 = settings.cluster_settings()
    assert (eu1.cluster_name, eu1.bootstrap_servers, us1.bootstrap_servers) == (
        "prod-eu1", "kafka-eu1.kafka:9093", "kafka-us1.kafka:9092",
    )  # fmt: skip
    assert eu1.kafka_options["sasl.jaas.config"] == "<secret kafka-eu1-client/sasl.jaas.config>"
    assert (
        eu1.kafka_options["security.protocol"] == "SASL_SSL" and "sasl.jaas.config" not in us1.kafka_options
    )
    assert eu1.checkpoint_location == "/var/lib/coordinator-mirror/checkpoint/prod-eu1"
    assert us1.lag_interval_s == 30


def test_settings_file_follows_the_mode(helm: Helm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = load_rendered_settings(helm.render("deployment-s3a.yaml"), tmp_path, monkeypatch)
    assert deployment.spark_master == "local[2]"
    assert deployment.spark_conf == {
        "spark.driver.memory": "2g",
        "spark.hadoop.fs.s3a.endpoint": "http://minio.storage:9000",
        "spark.hadoop.fs.s3a.path.style.access": "true",
    }
    spark = load_rendered_settings(helm.render("spark-s3a.yaml"), tmp_path, monkeypatch)
    assert spark.spark_master == "k8s://https://kubernetes.default.svc:443"
    assert spark.spark_conf == {}  # submit-time settings go to the SparkApplication
    # the user's own spark_conf wins over the chart's
    mine = helm.render(sets=["settings.spark_conf.spark\\.driver\\.memory=5g"])
    assert yaml.safe_load(mine.settings_yaml())["spark_conf"] == {"spark.driver.memory": "5g"}


# ------------------------------------------------------------------------------ deployment mode
def test_deployment_runs_one_driver_safely(helm: Helm) -> None:
    r = helm.render()
    assert r.kinds() == [
        "ConfigMap",
        "Deployment",
        "PersistentVolumeClaim",
        "Service",
        "Service",
        "ServiceAccount",
    ]
    dep = r.get("Deployment")
    spec = dep["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}  # never two writers on one checkpoint
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= 90  # the mirror drains a batch for up to 60 s
    assert pod["automountServiceAccountToken"] is False
    # a Service named cm-http would otherwise inject CM_HTTP_PORT=tcp://... into the settings
    assert pod["enableServiceLinks"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    [c] = pod["containers"]
    assert c["args"] == ["run", "--config", "/etc/coordinator-mirror/config/settings.yaml"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
    startup = c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"]
    assert startup >= 600, "recovering the store from the checkpoint takes time"
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for path in ("/tmp", "/var/lib/spark/local", "/home/mirror"):  # writable scratch on a read-only root
        assert "emptyDir" in volumes[mounts[path]], path
    assert (
        volumes[mounts["/var/lib/coordinator-mirror"]]["persistentVolumeClaim"]["claimName"]
        == (r.get("PersistentVolumeClaim")["metadata"]["name"])
    )
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["SPARK_LOCAL_DIRS"] == "/var/lib/spark/local"
    assert c["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    pvc = r.get("PersistentVolumeClaim")
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert "checksum/settings" in spec["template"]["metadata"]["annotations"]


def test_settings_change_rolls_the_pod(helm: Helm) -> None:
    def checksum(*sets: str) -> str:
        dep = helm.render(sets=list(sets)).get("Deployment")
        return str(dep["spec"]["template"]["metadata"]["annotations"]["checksum/settings"])

    assert checksum() != checksum("settings.trigger_interval_s=10")


def test_existing_claim_and_secret_files(helm: Helm) -> None:
    r = helm.render("deployment-sasl-ssl.yaml")
    assert not r.all("PersistentVolumeClaim")
    pod = r.get("Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "mirror-checkpoint"
    assert volumes["secret-kafka-truststore"]["secret"] == {
        "secretName": "kafka-truststore",
        "items": [{"key": "truststore.p12", "path": "truststore.p12"}],
    }
    [c] = pod["containers"]
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["secret-kafka-truststore"] == {
        "name": "secret-kafka-truststore",
        "mountPath": "/etc/coordinator-mirror/secrets/kafka-truststore",
        "readOnly": True,
    }
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
    assert c["image"] == "registry.example.com/kafka/coordinator-mirror:0.1.0"


def test_object_store_checkpoint_without_volume(helm: Helm) -> None:
    r = helm.render("deployment-s3a.yaml")
    assert not r.all("PersistentVolumeClaim")
    [c] = r.get("Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in c["env"]}
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"] == {
        "name": "s3-credentials",
        "key": "AWS_ACCESS_KEY_ID",
    }
    assert "AWS_SESSION_TOKEN" not in env


def test_services_api_waits_for_readiness_metrics_does_not(helm: Helm) -> None:
    r = helm.render()
    api, metrics = r.get("Service", "coordinator-mirror"), r.get("Service", "-metrics")
    pod_labels = r.get("Deployment")["spec"]["template"]["metadata"]["labels"]
    for svc in (api, metrics):
        assert svc["spec"]["selector"].items() <= pod_labels.items()
        assert svc["spec"]["ports"][0]["targetPort"] == 8080
    assert metrics["spec"]["publishNotReadyAddresses"] is True
    assert "publishNotReadyAddresses" not in api["spec"]


# ------------------------------------------------------------------------------ sparkApplication
def test_sparkapplication(helm: Helm) -> None:
    r = helm.render("spark-s3a.yaml")
    assert "Deployment" not in r.kinds() and "PersistentVolumeClaim" not in r.kinds()
    app = r.get("SparkApplication")
    spec = app["spec"]
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert (spec["type"], spec["mode"], spec["sparkVersion"]) == ("Python", "cluster", "4.2.0")
    assert spec["mainApplicationFile"] == "local:///opt/coordinator-mirror/main.py"
    assert spec["arguments"] == ["run", "--config", "/etc/coordinator-mirror/config/settings.yaml"]
    assert spec["restartPolicy"]["type"] == "Always"
    assert (
        spec["sparkConf"]["spark.driver.extraClassPath"] == "/opt/coordinator-mirror/jars/spark-kafka-4.2.0/*"
    )
    assert (
        spec["sparkConf"]["spark.executor.extraClassPath"]
        == "/opt/coordinator-mirror/jars/spark-kafka-4.2.0/*"
    )
    assert spec["sparkConf"]["spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage"] == "true"
    assert spec["hadoopConf"] == {"fs.s3a.endpoint": "https://s3.us-east-2.amazonaws.com"}
    driver, executor = spec["driver"], spec["executor"]
    assert (driver["cores"], driver["memory"]) == (1, "2g")
    assert (executor["instances"], executor["cores"], executor["memory"]) == (3, 2, "4g")
    assert (
        driver["serviceAccount"] == executor["serviceAccount"] == r.get("ServiceAccount")["metadata"]["name"]
    )
    [dc] = driver["template"]["spec"]["containers"]
    assert dc["name"] == "spark-kubernetes-driver"
    assert dc["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert dc["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "readinessProbe" not in dc and "startupProbe" not in dc  # executors reach the driver via DNS
    assert dc["lifecycle"]["preStop"]["exec"]["command"] == ["/opt/coordinator-mirror/bin/stop-driver"]
    assert driver["template"]["spec"]["terminationGracePeriodSeconds"] >= 90
    assert driver["template"]["spec"]["enableServiceLinks"] is False
    denv = {e["name"]: e for e in dc["env"]}
    assert denv["CM_KAFKA_OPTIONS__SASL_JAAS_CONFIG"]["valueFrom"]["secretKeyRef"]["name"] == "kafka-client"
    [ec] = executor["template"]["spec"]["containers"]
    eenv = {e["name"] for e in ec["env"]}
    # executors write the state store to S3 and read Kafka with the truststore
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} <= eenv
    assert "/etc/coordinator-mirror/secrets/kafka-truststore" in {m["mountPath"] for m in ec["volumeMounts"]}
    # the Services select the driver pod: Spark's spark-role label plus the labels given the driver
    for svc in r.all("Service"):
        selector = svc["spec"]["selector"]
        assert selector["spark-role"] == "driver"
        assert {k: v for k, v in selector.items() if k != "spark-role"}.items() <= driver["labels"].items()
    assert executor["labels"]["app.kubernetes.io/instance"] == "mirror"
    # placement through the pod templates Spark merges itself (no operator webhook needed)
    extras = helm.render("spark-extras.yaml").get("SparkApplication")["spec"]
    for role in ("driver", "executor"):
        pod = extras[role]["template"]["spec"]
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert pod["tolerations"] == [{"key": "spark", "operator": "Exists", "effect": "NoSchedule"}]
        assert "tolerations" not in extras[role]
    # the driver manages its executors through the API server
    assert r.get("ServiceAccount")["automountServiceAccountToken"] is True
    role = r.get("Role")
    assert {"pods", "services", "configmaps"} <= set(role["rules"][0]["resources"])
    binding = r.get("RoleBinding")
    assert binding["subjects"][0]["namespace"] == NAMESPACE


# ------------------------------------------------------------------------------ monitoring
def test_no_monitoring_objects_by_default(helm: Helm) -> None:
    kinds = helm.render().kinds()
    assert "ServiceMonitor" not in kinds and "PrometheusRule" not in kinds
    assert not [d for d in helm.render().all("ConfigMap") if "-dashboard-" in d["metadata"]["name"]]


def test_servicemonitor_scrapes_the_metrics_service(helm: Helm) -> None:
    for files in (("monitoring.yaml",), ("spark-s3a.yaml",)):
        r = helm.render(*files)
        sm = r.get("ServiceMonitor")
        metrics = r.get("Service", "-metrics")
        assert sm["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"]["labels"].items()
        assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        [endpoint] = sm["spec"]["endpoints"]
        assert endpoint["port"] in {p["name"] for p in metrics["spec"]["ports"]}
        assert endpoint["path"] == "/metrics"
        # the API Service is not scraped twice
        api = r.get("Service", "coordinator-mirror")
        assert not sm["spec"]["selector"]["matchLabels"].items() <= api["metadata"]["labels"].items()


def test_prometheusrule_carries_every_rule(helm: Helm) -> None:
    """The PrometheusRule holds the rules file's groups and alerts (tests/test_helm/test_alerting.py
    compares them field by field, with overrides)."""
    from dashboards.rules import rule_groups

    rule = helm.render("monitoring.yaml").get("PrometheusRule")
    groups = rule["spec"]["groups"]
    assert [g["name"] for g in groups] == [g["name"] for g in rule_groups()]
    assert [[r["alert"] for r in g["rules"]] for g in groups] == [
        [r["alert"] for r in g["rules"]] for g in rule_groups()
    ]
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_chart_metadata(helm: Helm) -> None:
    """Artifact Hub's and `helm lint`'s fields: home and sources are the project, the icon a file
    of it (dashboards.rules.PROJECT_URL; the alerts' runbook_url points there too)."""
    from dashboards.rules import PROJECT_URL

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["home"] == PROJECT_URL and chart["sources"] == [PROJECT_URL]
    raw = PROJECT_URL.replace("https://github.com/", "https://raw.githubusercontent.com/") + "/main/"
    assert chart["icon"].startswith(raw)
    icon = CHART.parents[1] / chart["icon"].removeprefix(raw)
    assert icon.is_file() and icon.read_text().lstrip().startswith("<svg")


def test_dashboards_configmaps_carry_the_files(helm: Helm) -> None:
    r = helm.render("monitoring.yaml")
    maps = [d for d in r.all("ConfigMap") if "-dashboard-" in d["metadata"]["name"]]
    files = sorted((CHART / "files" / "dashboards").glob("*.json"))
    assert len(maps) == len(files) > 0
    by_key = {k: v for m in maps for k, v in m["data"].items()}
    for f in files:
        assert by_key[f.name] == f.read_text(), f.name  # exactly the file
        json.loads(by_key[f.name])
    for m in maps:
        assert m["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert m["metadata"]["namespace"] == "monitoring"
        assert m["metadata"]["annotations"] == {"grafana_folder": "Kafka"}
    relabelled = helm.render(
        "monitoring.yaml", sets=["dashboards.label=my_dashboards", "dashboards.labelValue=yes"]
    )
    for m in [d for d in relabelled.all("ConfigMap") if "-dashboard-" in d["metadata"]["name"]]:
        assert m["metadata"]["labels"]["my_dashboards"] == "yes"


def test_packaged_chart_renders_like_the_directory(helm: Helm, tmp_path: Path) -> None:
    """`helm package` keeps what the templates read (files/ for the rules and dashboards)."""
    proc = helm.run("package", str(CHART), "-d", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    [package] = tmp_path.glob("coordinator-mirror-*.tgz")
    args = ["template", "mirror", "--namespace", NAMESPACE, "-f", str(VALUES_DIR / "monitoring.yaml")]
    packaged = helm.run(*args[:2], str(package), *args[2:])
    directory = helm.run(*args[:2], str(CHART), *args[2:])
    assert packaged.returncode == 0, packaged.stderr
    assert packaged.stdout == directory.stdout
