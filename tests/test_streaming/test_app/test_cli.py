"""The command line as a user meets it (`streaming.app.cli`): --version, the demo without the lab, a
product wheel that carries no lab, crash traces.  The ``run`` command's flags: test_run_cmd.py."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from streaming.app import cli
from tests.support.processes import run_cli

REPO = Path(__file__).resolve().parents[3]


def test_version_prints_the_installed_distribution_version() -> None:
    done = run_cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"coordinator-mirror {cli.version()}"
    assert cli.version() != "unknown"


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


def test_a_crash_in_native_code_prints_every_python_thread() -> None:
    """A segfault in a native library (here: a read of address 0) is not silent: the CLI's crash
    traces print the Python stack of every thread, the one naming the crashing call included."""
    code = (
        "import ctypes, threading, time\n"
        "from streaming.app import cli\n"
        "cli.enable_crash_traces()\n"
        "threading.Thread(target=time.sleep, args=(30,), name='bystander', daemon=True).start()\n"
        "def offsets_round():\n"
        "    ctypes.string_at(0)\n"
        "offsets_round()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == -11, proc  # SIGSEGV, as before: the trace does not swallow the crash
    assert "Fatal Python error: Segmentation fault" in proc.stderr
    assert "offsets_round" in proc.stderr  # the crashing thread's Python frames
    assert proc.stderr.count("hread 0x") >= 2, proc.stderr  # every thread ("Current thread", "Thread")
