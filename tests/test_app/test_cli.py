"""The command line as a user meets it: --version, --help with defaults and environment names, the
demo without the lab, and a product wheel that carries no lab."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from streaming.app import cli
from streaming.app.run_cmd import add_settings_arguments
from streaming.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_version_prints_the_installed_distribution_version() -> None:
    done = run_cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"coordinator-mirror {cli.version()}"
    assert cli.version() != "unknown"


def test_run_help_names_every_setting_with_its_default_and_environment_variable() -> None:
    parser = argparse.ArgumentParser(prog="run", formatter_class=argparse.RawTextHelpFormatter)
    add_settings_arguments(parser)
    text = parser.format_help()
    for name in Settings.model_fields:
        flag = "--" + name.replace("_", "-")
        assert flag in text
        assert f"env CM_{name.upper()}]" in text, name
    assert '[default: "__consumer_offsets"; env CM_TOPIC]' in text
    assert "[default: 5000000; env CM_MAX_OFFSETS_PER_TRIGGER]" in text
    assert "env CM_CONFIG_FILE" in text


def test_demo_without_the_lab_says_how_to_get_it(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    handlers: cli.Handlers = {}
    cli._demo_missing(sub, handlers)
    assert handlers["demo"](parser.parse_args(["demo"])) == 2
    assert "pip install ./lab" in capsys.readouterr().err


def test_the_lab_plugs_demo_into_the_cli() -> None:
    _parser, handlers = cli.build_parser()
    assert {"run", "capture", "decode", "demo"} <= set(handlers)
    assert handlers["demo"].__module__ == "lab.demo"


def test_the_product_wheel_carries_no_lab_and_no_lab_dependency(tmp_path: Path) -> None:
    # built from a copy without lab/: the product must not need it (and the build's own build/
    # directory stays out of the work tree)
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    for package in ("decoders", "state", "streaming"):
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
        check=True,
        timeout=300,
    )
    (wheel,) = out.glob("coordinator_mirror-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = next(zf.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"decoders", "state", "streaming"}
    assert "streaming/app/cli.py" in names and "streaming/serving/api.py" in names
    assert not [line for line in metadata.splitlines() if line.startswith("Requires-Dist: kafka-python")]
    assert any(n.endswith("licenses/LICENSE") or n.endswith("/LICENSE") for n in names)
