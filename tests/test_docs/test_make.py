"""The README's three commands, as make would run them on a fresh machine (``make -n -B``: every
command of every prerequisite, none run): `make setup` installs what the mirror and the demo need
and nothing only the tests need -- no apt packages, no Go toolchain, no chart tools, no test jars,
no class archive to wait for -- and `make test` installs those itself (`make test-tools`), so that
CI's `make setup && make test` in a fresh clone still has everything."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.require import require

REPO = Path(__file__).resolve().parents[2]

#: what only the tests (or the chart's tests) need, as it shows in a command that installs or makes it
TEST_ONLY: dict[str, str] = {
    "an apt package (promtool, the KDC, Go)": r"apt-get (update|install -y)",
    "prometheus (promtool)": r"\bpromtool\b",
    "MIT Kerberos (the test broker's KDC)": r"\bkrb5",
    "a Go toolchain": r"golang\.org/toolchain",
    "helm": r"helm\.sh/helm",
    "kubeconform": r"yannh/kubeconform",
    "hadolint": r"hadolint",
    "the Kubernetes and CRD schemas": r"k8s_schemas",
    "the older Kafka broker": r"-Dkafka\.version=3\.",
    "a vendor's Kafka client plugin": r"aws-msk-iam-auth",
    "the Spark driver's class archive": r"class_archive_cmd",
}


def _dry_run(target: str) -> str:
    """What `make <target>` would run on a machine where nothing was made yet."""
    require(shutil.which("make") is not None, "make on PATH")
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _found(text: str) -> list[str]:
    return [what for what, pattern in TEST_ONLY.items() if re.search(pattern, text)]


def test_setup_needs_nothing_only_the_tests_need() -> None:
    setup = _dry_run("setup")
    assert "pip install" in setup and "kafka.version=4." in setup  # the venv and the demo's broker
    assert _found(setup) == [], setup


@pytest.mark.parametrize("target", ["test-tools", "test"])
def test_make_test_installs_what_only_the_tests_need(target: str) -> None:
    """Every entry of TEST_ONLY shows in what `make test-tools` (and so `make test`) runs: the
    patterns are live, and the check above can fail."""
    text = _dry_run(target)
    assert sorted(_found(text)) == sorted(TEST_ONLY), text
    if target == "test":
        assert "-m pytest" in text.splitlines()[-1]
        assert "pip install" in text  # setup's part too


def test_the_readme_names_the_test_tools() -> None:
    readme = (REPO / "README.md").read_text()
    three = readme.split("## Three commands", 1)[1].split("\n## ", 1)[0]
    assert "make test-tools" in three
    assert re.search(r"^test-tools:", (REPO / "Makefile").read_text(), re.M)
