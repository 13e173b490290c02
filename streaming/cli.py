"""The `coordinator-mirror` command line: one entry point, one sub-command per job."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]]:
    parser = argparse.ArgumentParser(
        prog="coordinator-mirror",
        description="A live mirror of Kafka group-coordinator state, read from __consumer_offsets.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {}

    from streaming import capture, decode_cmd, demo, run_cmd

    for command in (run_cmd, demo, capture, decode_cmd):
        command.register(sub, handlers)
    return parser, handlers


def main(argv: Sequence[str] | None = None) -> int:
    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
