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
from streaming.app.run_cmd import FILE_ONLY, add_settings_arguments
from streaming.settings import Settings

REPO = Path(__file__).resolve().parents[3]


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
        if name in FILE_ONLY:  # a list of maps: the settings file or CM_<NAME> (JSON) only
            assert "--" + name.replace("_", "-") not in text, name
            continue
        assert "--" + name.replace("_", "-") in text, name
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


@pytest.mark.spark
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["request.timeout.ms=soon"], "kafka_options: request.timeout.ms: invalid value soon"),
        (
            ["security.protocol=SASL_SSL", "sasl.mechanism=OAUTHBEARER",
             "sasl.login.callback.handler.class=com.example.NoSuchHandler"],
            "kafka_options: sasl.login.callback.handler.class: class com.example.NoSuchHandler is not on the "
            "class path",
        ),
    ],
)  # fmt: skip
def test_run_stops_at_start_on_a_client_option_kafka_refuses(options: list[str], message: str) -> None:
    """Kafka's own client judges the options (no translation): one it refuses stops `run` at start,
    before any query, with exit 2, naming the setting and the option -- no traceback."""
    argv = ["run", "--bootstrap-servers", "127.0.0.1:1"]
    for option in options:
        argv += ["--kafka-options", option]
    done = run_cli(*argv)
    assert done.returncode == 2, done.stderr
    assert f"coordinator-mirror: {message}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


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
