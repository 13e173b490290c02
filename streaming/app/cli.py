"""The `coordinator-mirror` command line: one entry point, one sub-command per job.

The product's commands (run, capture, decode) are registered here.  Other distributions add
commands through the ``coordinator_mirror.commands`` entry-point group: the lab (``lab/``, the
``coordinator-mirror-lab`` distribution that `make setup` installs) adds ``demo``.  Without the lab
``demo`` still exists and says how to get it.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

from streaming.app import capture_cmd, decode_cmd, run_cmd

Handlers = dict[str, Callable[[argparse.Namespace], int]]
COMMAND_GROUP = "coordinator_mirror.commands"
DISTRIBUTION = "coordinator-mirror"

log = logging.getLogger("coordinator_mirror")


def version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _plugins() -> list[Any]:
    """Command modules other distributions register (each has ``register(sub, handlers)``)."""
    modules = []
    for ep in sorted(metadata.entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        try:
            modules.append(ep.load())
        except Exception as exc:  # a broken plugin must not take the product's commands down
            print(f"coordinator-mirror: command {ep.name!r} could not be loaded: {exc}", file=sys.stderr)
    return modules


def _demo_missing(sub: argparse._SubParsersAction[argparse.ArgumentParser], handlers: Handlers) -> None:
    sub.add_parser("demo", help="the embedded demo (needs the lab: `make setup` or `pip install ./lab`)")

    def run(_args: argparse.Namespace) -> int:
        print(
            "coordinator-mirror demo needs the lab (a local Kafka and demo groups), which is not "
            "installed: run `make setup`, or `pip install ./lab` from the source tree.",
            file=sys.stderr,
        )
        return 2

    handlers["demo"] = run


def build_parser() -> tuple[argparse.ArgumentParser, Handlers]:
    parser = argparse.ArgumentParser(
        prog="coordinator-mirror",
        description="A live mirror of Kafka group-coordinator state, read from __consumer_offsets.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    handlers: Handlers = {}
    for command in (run_cmd, capture_cmd, decode_cmd, *_plugins()):
        command.register(sub, handlers)
    if "demo" not in handlers:
        _demo_missing(sub, handlers)
    return parser, handlers


def enable_crash_traces() -> None:
    """On a fatal signal in native code (pyarrow, the JVM bridge) print every
    Python thread's stack to stderr before the process dies: the one trace an operator gets of a
    crash in a library (the 100k-group bench lost its driver to a segfault in librdkafka's main
    thread with nothing but a dmesg line)."""
    if not faulthandler.is_enabled():
        faulthandler.enable(file=sys.stderr, all_threads=True)


def main(argv: Sequence[str] | None = None) -> int:
    enable_crash_traces()
    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
