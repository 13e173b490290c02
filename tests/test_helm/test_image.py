"""The container image definition: lint, build inputs, and the scripts it runs.

No Docker engine runs here, so the image is checked without building it: hadolint over the
Dockerfile; every COPY source exists and survives .dockerignore; the Maven stage resolves the same
connector set as `make jars`, and the S3A jars match pyspark's Hadoop; the paths and ids the chart
relies on are the ones the Dockerfile creates; the entrypoint's modes, the SparkApplication main
file and the driver's preStop hook are run for real with stand-ins for tini, Java and Spark.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.support.helm import CHART, REPO, tool

DOCKERFILE = REPO / "Dockerfile"
DOCKER = REPO / "docker"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    current = ""
    for line in DOCKERFILE.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            word, _, rest = current.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            current = ""
    return out


def _arg_default(name: str) -> str:
    defaults = {
        m.group(1) for cmd, a in instructions() if cmd == "ARG" for m in [re.match(rf"{name}=(\S+)", a)] if m
    }
    assert len(defaults) == 1, f"ARG {name} must have one default everywhere, got {defaults}"
    return defaults.pop()


def _env() -> dict[str, str]:
    env: dict[str, str] = {}
    for cmd, args in instructions():
        if cmd == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", args):
                env[key] = value
    return env


def copy_sources() -> list[str]:
    """Every COPY source taken from the build context (not from another stage)."""
    sources = []
    for cmd, args in instructions():
        if cmd == "COPY" and "--from=" not in args:
            sources += [w for w in args.split() if not w.startswith("--")][:-1]
    return sources


def _makefile_var(name: str) -> str:
    m = re.search(rf"^{name}\s*\?=\s*(\S+)", (REPO / "Makefile").read_text(), re.M)
    assert m is not None, name
    return m.group(1)


# ------------------------------------------------------------------------------ lint
def test_hadolint() -> None:
    proc = subprocess.run(
        [tool("hadolint"), "--format", "json", str(DOCKERFILE)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    findings = json.loads(proc.stdout or "[]")
    assert findings == [] and proc.returncode == 0, findings or proc.stderr


@pytest.mark.parametrize("script", ["entrypoint.sh", "stop-driver"])
def test_scripts_parse_and_are_executable(script: str) -> None:
    path = DOCKER / script
    assert os.access(path, os.X_OK), f"{path} must be executable (COPY keeps the mode)"
    shell = "bash" if path.read_text().startswith("#!/bin/bash") else "sh"
    subprocess.run([shell, "-n", str(path)], check=True)


# ------------------------------------------------------------------------------ build inputs
def _dockerignore_included(path: str) -> bool:
    """Docker's rule: the last matching pattern decides; a pattern matching a directory covers
    everything below it; `*` stays within one path element, `**` spans any."""
    included = True
    for raw in (REPO / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = "".join(
            ".*" if part == "**" else "[^/]*" if part == "*" else "[^/]" if part == "?" else re.escape(part)
            for part in re.split(r"(\*\*|\*|\?)", pattern)
        )
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(re.fullmatch(regex, p) for p in prefixes):
            included = negate
    return included


def test_every_copy_source_exists_in_the_build_context() -> None:
    sources = copy_sources()
    assert sources, "no COPY from the build context?"
    for src in sources:
        path = REPO / src
        assert path.exists(), f"COPY {src}: no such file"
        files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
        kept = [p for p in files if _dockerignore_included(str(p.relative_to(REPO)))]
        assert kept, f"COPY {src}: excluded by .dockerignore"
        if path.is_dir():
            assert _dockerignore_included(f"{src}/__init__.py") or not (path / "__init__.py").exists()
    assert not _dockerignore_included("tests/conftest.py")
    assert not _dockerignore_included("streaming/__pycache__/app.cpython-311.pyc")


def test_the_image_installs_every_package_the_project_declares() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = set(copy_sources())
    assert packages <= copied, f"COPY the packages pyproject installs: {packages - copied}"
    assert pyproject["project"]["readme"] in copied, "pip install . needs the readme"
    python = re.search(r"python:(\d+\.\d+)", _arg_default("PYTHON_IMAGE"))
    assert python is not None
    assert f"/python{python.group(1)}/" in _env()["SPARK_HOME"]
    lowest = re.search(r">=\s*(\d+\.\d+)", pyproject["project"]["requires-python"])
    assert lowest is not None
    assert tuple(map(int, python.group(1).split("."))) >= tuple(map(int, lowest.group(1).split(".")))


def test_maven_stage_resolves_what_make_jars_resolves() -> None:
    run = " ".join(a for c, a in instructions() if c == "RUN" and "mvn" in a)
    for pom in re.findall(r"-f (\S+pom\.xml)", run):
        assert (REPO / pom).is_file(), pom
    docker_ids = re.search(r"-DincludeArtifactIds=(\S+)", run)
    make_ids = re.search(r"-DincludeArtifactIds=(\S+)", (REPO / "Makefile").read_text())
    assert docker_ids is not None and make_ids is not None
    assert docker_ids.group(1) == make_ids.group(1)
    assert _arg_default("SPARK_VERSION") == _makefile_var("SPARK_VERSION")
    # the layout streaming/jars.py reads: <COORDINATOR_MIRROR_JARS>/spark-kafka-<v>/ + .complete
    assert "spark-kafka-${SPARK_VERSION}/.complete" in run
    assert _env()["COORDINATOR_MIRROR_JARS"] == "/opt/coordinator-mirror/jars"


def test_s3a_is_a_build_option() -> None:
    """The S3A bundle (~690 MB) is in the image only with --build-arg WITH_S3A=true."""
    text = DOCKERFILE.read_text()
    assert "ARG WITH_S3A=false" in text
    resolve = text.split("docker/cloud-jars/pom.xml dependency:copy-dependencies")[0].rsplit("RUN ", 1)[-1]
    assert 'if [ "${WITH_S3A}" = true ]; then' in resolve


def test_s3a_jars_match_the_hadoop_in_pyspark() -> None:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    [client] = [p.name for p in jars.glob("hadoop-client-api-*.jar")]
    hadoop = client.removeprefix("hadoop-client-api-").removesuffix(".jar")
    pom = ET.parse(DOCKER / "cloud-jars" / "pom.xml").getroot()
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    version = pom.find("m:properties/m:hadoop.version", ns)
    assert version is not None and version.text == hadoop
    artifacts = {
        d.findtext("m:artifactId", namespaces=ns) for d in pom.iterfind("m:dependencies/m:dependency", ns)
    }
    assert artifacts == {"hadoop-aws"}  # the AWS SDK v2 bundle comes as its dependency


def test_the_image_builds_our_local_file_system_as_make_jars_does(tmp_path: Path) -> None:
    """The jars stage's jvm/localfs step, run for real (Maven Central, javac): the jar lands where
    streaming/jars.py looks, built against the Hadoop that pyspark ships."""
    import pyspark

    [client] = [p.name for p in (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")]
    assert _arg_default("HADOOP_VERSION") == client.removeprefix("hadoop-client-api-").removesuffix(".jar")
    [run] = [a for c, a in instructions() if c == "RUN" and "jvm/localfs" in a]
    assert ("COPY", "jvm/localfs/src jvm/localfs/src") in instructions()
    script = (
        run.replace("${SPARK_VERSION}", _arg_default("SPARK_VERSION"))
        .replace("${HADOOP_VERSION}", _arg_default("HADOOP_VERSION"))
        .replace("/build/", f"{tmp_path}/build/")
        .replace("/out/", f"{tmp_path}/out/")
    )
    result = subprocess.run(
        ["bash", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    folder = tmp_path / "out" / "jars" / f"localfs-{_arg_default('SPARK_VERSION')}"
    assert (folder / ".complete").is_file()
    listing = subprocess.run(
        ["jar", "tf", str(folder / "coordinator-mirror-localfs.jar")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "io/github/coordinatormirror/fs/NoForkLocalFileSystem$Fs.class" in listing
    from streaming import jars

    os.environ["COORDINATOR_MIRROR_JARS"], saved = (
        str(tmp_path / "out" / "jars"),
        os.environ.get("COORDINATOR_MIRROR_JARS"),
    )
    try:
        assert jars.localfs_jar(_arg_default("SPARK_VERSION")) == str(
            folder / "coordinator-mirror-localfs.jar"
        )
    finally:
        if saved is None:
            del os.environ["COORDINATOR_MIRROR_JARS"]
        else:
            os.environ["COORDINATOR_MIRROR_JARS"] = saved


def test_the_image_builds_the_driver_clients_as_make_jars_does(tmp_path: Path) -> None:
    """The jars stage's driver-clients step (kafka-clients, jose4j, jvm/bridge), run for real: the
    same versions as the Makefile's, the jars where streaming/jars.py looks."""
    assert _arg_default("KAFKA_CLIENTS_VERSION") == _makefile_var("KAFKA_CLIENTS_VERSION")
    assert _arg_default("JOSE4J_VERSION") == _makefile_var("JOSE4J_VERSION")
    [run] = [a for c, a in instructions() if c == "RUN" and "jvm/bridge" in a]
    assert ("COPY", "jvm/bridge/src jvm/bridge/src") in instructions()
    version = _arg_default("KAFKA_CLIENTS_VERSION")
    script = (
        run.replace("${KAFKA_CLIENTS_VERSION}", version)
        .replace("${JOSE4J_VERSION}", _arg_default("JOSE4J_VERSION"))
        .replace("/build/", f"{tmp_path}/build/")
        .replace("/out/", f"{tmp_path}/out/")
    )
    result = subprocess.run(
        ["bash", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    from streaming import jars

    os.environ["COORDINATOR_MIRROR_JARS"], saved = (
        str(tmp_path / "out" / "jars"),
        os.environ.get("COORDINATOR_MIRROR_JARS"),
    )
    try:
        found = jars.driver_client_jars(version)
    finally:
        if saved is None:
            del os.environ["COORDINATOR_MIRROR_JARS"]
        else:
            os.environ["COORDINATOR_MIRROR_JARS"] = saved
    folder = tmp_path / "out" / "jars" / f"clients-{version}"
    assert found == [
        str(folder / "coordinator-mirror-kafka.jar"),
        str(folder / f"kafka-clients-{version}.jar"),
        str(folder / f"jose4j-{_arg_default('JOSE4J_VERSION')}.jar"),
    ]
    listing = subprocess.run(
        ["jar", "tf", found[0]], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "io/github/coordinatormirror/kafka/ClusterReads.class" in listing


# ------------------------------------------------------------------------------ image <-> chart
def test_what_the_chart_expects_of_the_image() -> None:
    copies = {args.split()[-1]: args for cmd, args in instructions() if cmd == "COPY"}
    assert "/opt/coordinator-mirror/main.py" in copies  # mainApplicationFile
    assert any("stop-driver" in a and dst == "/opt/coordinator-mirror/bin/" for dst, a in copies.items())
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert "/opt/coordinator-mirror/jars/spark-kafka-" in helpers  # extraClassPath
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    [user] = [a for c, a in instructions() if c == "USER"]
    uid, gid = user.split(":")
    assert (values["podSecurityContext"]["runAsUser"], values["podSecurityContext"]["runAsGroup"]) == (
        int(uid),
        int(gid),
    )
    assert f'define "cm.home" -}}}}{_env()["HOME"]}{{{{' in helpers  # the home emptyDir
    [entrypoint] = [json.loads(a) for c, a in instructions() if c == "ENTRYPOINT"]
    assert entrypoint == ["/opt/coordinator-mirror/bin/entrypoint.sh"]
    assert [json.loads(a) for c, a in instructions() if c == "CMD"] == [["run"]]
    assert int(values["settings"]["http_port"]) in {
        int(p) for c, a in instructions() if c == "EXPOSE" for p in a.split()
    }


# ------------------------------------------------------------------------------ the scripts, run
@pytest.fixture
def fake_runtime(tmp_path: Path) -> dict[str, str]:
    """tini, coordinator-mirror, spark-submit and java stand-ins that print what they were given."""
    bin_dir, spark, java = tmp_path / "bin", tmp_path / "spark", tmp_path / "java"
    for d in (bin_dir, spark / "bin", java / "bin"):
        d.mkdir(parents=True)
    stubs = {
        bin_dir / "tini": '[ "$1" = -s ] && shift; [ "$1" = -- ] && shift; echo tini; exec "$@"',
        bin_dir / "coordinator-mirror": 'echo coordinator-mirror "$@"',
        spark / "bin" / "spark-submit": 'echo spark-submit "$@"',
        java / "bin" / "java": 'echo java "$@"',
    }
    for path, body in stubs.items():
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "TINI": str(bin_dir / "tini"),
        "SPARK_HOME": str(spark),
        "JAVA_HOME": str(java),
        "HOME": str(tmp_path),
    }


def _entrypoint(env: dict[str, str], *args: str) -> list[str]:
    proc = subprocess.run(
        [str(DOCKER / "entrypoint.sh"), *args],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")[:-1]


def test_entrypoint_runs_the_mirror_under_tini(fake_runtime: dict[str, str]) -> None:
    assert _entrypoint(fake_runtime) == ["tini", "coordinator-mirror run"]
    assert _entrypoint(fake_runtime, "run", "--config", "/etc/x.yaml") == [
        "tini",
        "coordinator-mirror run --config /etc/x.yaml",
    ]
    assert _entrypoint(fake_runtime, "--help") == ["tini", "coordinator-mirror --help"]
    assert _entrypoint(fake_runtime, "demo") == ["tini", "coordinator-mirror demo"]
    assert _entrypoint(fake_runtime, "echo", "pass-through") == ["pass-through"]


def test_entrypoint_spark_driver_role(fake_runtime: dict[str, str]) -> None:
    env = {**fake_runtime, "SPARK_DRIVER_BIND_ADDRESS": "10.1.2.3"}
    args = [
        "--properties-file", "/opt/spark/conf/spark.properties",
        "--class", "org.apache.spark.deploy.PythonRunner",
        "local:///opt/coordinator-mirror/main.py", "run",
    ]  # fmt: skip
    assert _entrypoint(env, "driver", *args) == [
        "tini",
        "spark-submit --conf spark.driver.bindAddress=10.1.2.3 "
        "--conf spark.executorEnv.SPARK_DRIVER_POD_IP=10.1.2.3 --deploy-mode client " + " ".join(args),
    ]


def test_entrypoint_spark_executor_role(fake_runtime: dict[str, str]) -> None:
    env = {
        **fake_runtime,
        "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078",
        "SPARK_JAVA_OPT_1": "-Dspark.network.timeout=300s",
        "SPARK_EXECUTOR_MEMORY": "2g",
        "SPARK_CLASSPATH": "/opt/coordinator-mirror/jars/spark-kafka-4.0.0/*",
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@driver-svc:7078",
        "SPARK_EXECUTOR_ID": "3",
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_APPLICATION_ID": "spark-0001",
        "SPARK_EXECUTOR_POD_IP": "10.1.2.4",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "mirror-exec-3",
    }
    spark = fake_runtime["SPARK_HOME"]
    assert _entrypoint(env, "executor") == [
        "tini",
        f"java -Dspark.driver.port=7078 -Dspark.network.timeout=300s -Xms2g -Xmx2g "
        f"-cp {spark}/conf:/opt/coordinator-mirror/jars/spark-kafka-4.0.0/*:{spark}/jars/*:/: "
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend "
        "--driver-url spark://CoarseGrainedScheduler@driver-svc:7078 --executor-id 3 --cores 2 "
        "--app-id spark-0001 --hostname 10.1.2.4 --resourceProfileId 0 --podName mirror-exec-3",
    ]


def test_spark_main_runs_the_cli_and_keeps_a_pidfile(tmp_path: Path) -> None:
    pidfile = tmp_path / "mirror.pid"
    env = {**os.environ, "COORDINATOR_MIRROR_PIDFILE": str(pidfile), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(DOCKER / "spark_main.py"), "run", "--config", str(tmp_path / "missing.yaml")],
        check=False, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    # the real CLI ran (and rejected the missing settings file, naming it), then the pidfile went
    assert proc.returncode == 2, proc.stderr
    assert "missing.yaml" in proc.stderr
    assert not pidfile.exists()


def test_stop_driver_stops_the_python_driver_and_waits(tmp_path: Path) -> None:
    pidfile = tmp_path / "mirror.pid"
    marker = tmp_path / "stopped"
    driver = subprocess.Popen(
        [
            sys.executable, "-c",
            "import os, signal, sys, time\n"
            f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
            "def stop(*_):\n"
            "    time.sleep(1)  # the mirror draining its micro-batch\n"
            f"    open({str(marker)!r}, 'w').write('clean')\n"
            "    sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, stop)\n"
            "time.sleep(60)\n",
        ]
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        env = {**os.environ, "COORDINATOR_MIRROR_PIDFILE": str(pidfile)}
        subprocess.run([str(DOCKER / "stop-driver")], env=env, check=True, timeout=30)
        # the hook returned only after the driver had stopped cleanly
        assert marker.read_text() == "clean"
        assert driver.wait(timeout=5) == 0
    finally:
        if driver.poll() is None:
            driver.send_signal(signal.SIGKILL)
            driver.wait()
    # no pidfile (driver not started, or already gone): nothing to do
    pidfile.unlink(missing_ok=True)
    subprocess.run([str(DOCKER / "stop-driver")], env=env, check=True, timeout=10)
