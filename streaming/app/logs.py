"""The service log: text for people, or one JSON object per line for log pipelines (``log_format``).

Both formats carry the same fields, and Spark's own log4j lines follow the same choice
(`streaming.pipeline.session` configures log4j before the JVM logs its first line): a JSON line is
``{"ts": "2026-11-26T08:59:35.123Z", "level": "INFO", "logger": "coordinator_mirror", "msg":
"..."}`` plus ``exception`` (class, msg, stacktrace) when there is one -- the field names of
Spark's own JSON layout (``org/apache/spark/SparkLayout.json``), so one parser reads both.  Levels
are log4j's names (WARN, not Python's WARNING).

`report` is the one way a command tells the user why it stops (``coordinator-mirror: <cause>``):
a plain line on stderr, or an ERROR object in JSON.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
from typing import Any, Final, Literal

LogFormat = Literal["text", "json"]

TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Python's level names as log4j writes them
LEVELS: Final = {"WARNING": "WARN", "CRITICAL": "FATAL"}
#: loggers whose INFO lines describe their own internals
NOISY: Final = ("py4j", "kafka", "uvicorn", "uvicorn.error", "uvicorn.access")

log = logging.getLogger("coordinator_mirror")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts (UTC, ms), level, logger, msg [, exception]."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out: dict[str, Any] = {
            "ts": f"{ts}.{int(record.msecs):03d}Z",
            "level": LEVELS.get(record.levelname, record.levelname),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            out["exception"] = {
                "class": type(exc).__name__,
                "msg": str(exc),
                "stacktrace": "".join(traceback.format_exception(*record.exc_info)),
            }
        if record.stack_info:
            out["stack"] = record.stack_info
        return json.dumps(out, ensure_ascii=False, default=str)


_format: list[LogFormat] = ["text"]


def configure_logging(level: str, fmt: LogFormat = "text") -> None:
    """The process's logging: ``level`` for our loggers, the chosen format on stderr for every
    logger (Python warnings included)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level))
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.captureWarnings(True)
    _format[0] = fmt


def log_format() -> LogFormat:
    """The format `configure_logging` chose (text until then)."""
    return _format[0]


def report(message: str, prefix: str = "coordinator-mirror") -> None:
    """Why a command stops, for the user: ``<prefix>: <message>`` on stderr, or an ERROR line."""
    if _format[0] == "json":
        log.error("%s", message)
    else:
        print(f"{prefix}: {message}", file=sys.stderr)
