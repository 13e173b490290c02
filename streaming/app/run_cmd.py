"""`coordinator-mirror run`: the mirror against a real cluster (or a capture file).

Every setting of `streaming.settings.Settings` is a flag (``--bootstrap-servers``,
``--checkpoint-location``, ...); maps take ``KEY=VALUE`` and repeat (``--kafka-options
security.protocol=SASL_SSL``); ``--config FILE`` reads a YAML/JSON file; ``CM_*`` environment
variables sit between the two.  Invalid settings exit with status 2 and name the setting.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import time
import types
import typing
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, Final

from streaming.app.errors import EXIT_CONFIG, classify
from streaming.app.logs import configure_logging, report
from streaming.app.mirror import Mirror
from streaming.serving.api import AuthError
from streaming.settings import CONFIG_ENV, ENV_PREFIX, Settings, SettingsError, load_settings

log = logging.getLogger("coordinator_mirror")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def kv_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _bool(text: str) -> bool:
    if text.lower() in {"1", "true", "yes", "on"}:
        return True
    if text.lower() in {"0", "false", "no", "off"}:
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _default_text(field: Any) -> str:
    """A field's default as the settings file would spell it (JSON), for --help."""
    value = field.get_default(call_default_factory=True)
    try:
        return json.dumps(value.value if isinstance(value, Enum) else value, default=str)
    except (TypeError, ValueError):
        return str(value)


def setting_help(name: str, field: Any) -> str:
    """The flag's help: the model's description, its default and its environment variable."""
    text = f"{field.description or ''} [default: {_default_text(field)}; env {ENV_PREFIX}{name.upper()}]"
    return text.replace("%", "%%")  # argparse formats help strings with %


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per settings field, typed from the model (defaults stay in the model; --help shows
    each flag's default and environment variable)."""
    parser.add_argument("--config", metavar="FILE", help=f"settings file (YAML or JSON) [env {CONFIG_ENV}]")
    for name, field in Settings.model_fields.items():
        if name in FILE_ONLY:
            continue
        help_text = setting_help(name, field)
        annotation = field.annotation
        args: dict[str, Any] = {"dest": name, "default": None, "help": help_text}
        origin = typing.get_origin(annotation)
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        if origin in (types.UnionType, typing.Union) and len(inner) == 1:
            annotation, origin = inner[0], typing.get_origin(inner[0])
        if origin is dict:
            args.update(type=kv_pair, action="append", metavar="KEY=VALUE", help=help_text + " (repeatable)")
        elif origin is list:
            args.update(action="append", metavar="VALUE", help=help_text + " (repeatable)")
        elif origin is typing.Literal:
            args.update(choices=list(typing.get_args(annotation)))
        elif annotation is bool:
            args.update(type=_bool, metavar="BOOL")
        elif annotation in (int, float):
            args.update(type=annotation)
        elif annotation is Path:
            args.update(type=Path)
        parser.add_argument(_flag(name), **args)


#: settings a flag cannot spell (a list of maps): the settings file or the environment (JSON) only
FILE_ONLY: Final = frozenset({"clusters"})


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        value = getattr(args, name, None)
        if value is None:
            continue
        if typing.get_origin(field.annotation) is dict or (
            isinstance(value, list) and value and isinstance(value[0], tuple)
        ):
            value = dict(value)
        overrides[name] = value
    return load_settings(args.config, **overrides)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    handlers: dict[str, Callable[[argparse.Namespace], int]],
) -> None:
    p = sub.add_parser(
        "run",
        help="mirror a cluster's group coordinators (Ctrl-C / SIGTERM stops cleanly)",
        description="Read __consumer_offsets with Spark Structured Streaming and serve the mirror "
        "over HTTP (/groups, /groups/{id}, /ready, /healthz, /metrics).",
    )
    add_settings_arguments(p)
    handlers["run"] = run


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except SettingsError as exc:
        # the format asked for, if the bad setting is another one
        wanted = args.log_format or os.environ.get(f"{ENV_PREFIX}LOG_FORMAT", "text")
        configure_logging("INFO", "json" if wanted == "json" else "text")
        report(str(exc))
        return EXIT_CONFIG
    configure_logging(settings.log_level, settings.log_format)
    stop = threading.Event()
    return serve(settings, stop)


def serve(
    settings: Settings,
    stop: threading.Event,
    on_started: Callable[[Any], None] | None = None,
    spark: Any = None,
) -> int:
    """Start the mirror, report catch-up progress, serve until ``stop`` (or SIGINT/SIGTERM).

    ``spark``: an existing session to run in (tests); by default the mirror makes its own."""

    def _signal(signum: int, _frame: Any) -> None:
        # the one line a stop writes (the exit code says how it ended)
        if not stop.is_set():
            log.info("received %s: stopping between two micro-batches", signal.Signals(signum).name)
        stop.set()

    def _take_signals() -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _signal)
            signal.signal(signal.SIGINT, _signal)

    _take_signals()
    log.info("settings: %s", settings.redacted())
    mirror = Mirror(settings, spark=spark)
    try:
        try:
            mirror.start()
            # PySpark's SparkContext puts a SIGINT handler of its own in place (it cancels every
            # job and raises KeyboardInterrupt): Ctrl-C then failed the running batch and the
            # process exited 130 without a word
            _take_signals()
        except KeyboardInterrupt:  # Ctrl-C while the start was under way, to PySpark's handler
            _take_signals()
            _signal(signal.SIGINT, None)
            return 0
        except SettingsError as exc:  # found at start (client options only a Kafka client can judge)
            report(str(exc))
            return 2
        except AuthError as exc:  # the HTTP endpoint's credentials or TLS files
            report(f"invalid settings: {exc}")
            return 2
        except Exception as exc:
            error = classify(exc, bootstrap=settings.bootstrap_servers, secrets=settings.secret_values())
            log.debug("start failed", exc_info=True)
            report(error.message)
            return error.exit_code
        if mirror.http is not None and not stop.is_set():
            base = mirror.http.url
            log.info("API: %s/groups  %s/groups/{id}  %s/ready  %s/metrics", base, base, base, base)
        if on_started is not None:
            on_started(mirror)
        announced = False
        last_report = 0.0
        while not stop.wait(1.0):
            if mirror.fatal is not None:
                report(mirror.fatal.message)
                return mirror.fatal.exit_code
            r = mirror.status.view()
            if stop.is_set():  # a signal came while this step ran: its line is the last one
                break
            if r.ready and not announced:
                log.info("live: caught up with __consumer_offsets, mirroring %d groups", len(mirror.store))
                announced = True
            elif not r.ready and time.monotonic() - last_report > 5:
                log.info(
                    "catching up: %.1f%% of the end offsets reached, %d records behind",
                    100 * r.progress,
                    sum(r.behind.values()),
                )
                last_report = time.monotonic()
        return 0
    finally:
        mirror.stop()
        log.debug("stopped")
