"""Broker logging: levels per logger from properties (`log.level`, `log.level.<logger>`), text or JSON
lines (`log.format`), Kafka's BROKER_LOGGER resource (levels described and altered at runtime), and the
request logger `kafka.request.logger` (one line per request at DEBUG, off at INFO).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkalite.broker.context import RequestContext

REQUEST_LOGGER = "kafka.request.logger"
request_log = logging.getLogger(REQUEST_LOGGER)

TRACE = 5
logging.addLevelName(TRACE, "TRACE")
OFF = logging.CRITICAL + 10
logging.addLevelName(OFF, "OFF")

# Kafka's (log4j's) level names and the logging module's numbers
LEVELS: dict[str, int] = {
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": OFF,
}
_NAMES = {
    TRACE: "TRACE",
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARN",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "FATAL",
    OFF: "OFF",
}
ROOT = "root"  # Kafka's name for the root logger in BROKER_LOGGER configs


class LogLevelError(ValueError):
    """A level or logger name kafkalite cannot set; the message says which."""


def level_of(text: str) -> int:
    level = LEVELS.get(str(text).strip().upper())
    if level is None:
        raise LogLevelError(
            f"{text!r} is not a log level; use one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF"
        )
    return level


def level_name(level: int) -> str:
    return _NAMES.get(level, logging.getLevelName(level))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the exception if any."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": level_name(record.levelno),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(props: Mapping[str, object], default_level: str = "INFO") -> None:
    """Set up the process's logging from broker properties: `log.format` (text | json), `log.level`
    (the root level) and `log.level.<logger>` per logger."""
    fmt = str(props.get("log.format") or "text").strip().lower()
    if fmt not in ("text", "json"):
        raise LogLevelError(f"log.format={fmt!r}: use text or json")
    root_level = level_of(str(props.get("log.level") or default_level))
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(root_level)
    for key, value in props.items():
        if key.startswith("log.level.") and len(key) > len("log.level."):
            logging.getLogger(key[len("log.level.") :]).setLevel(level_of(str(value)))


def known_loggers() -> dict[str, int]:
    """Every logger kafkalite has made (and Kafka's request logger) with its effective level, and
    the root logger, for DescribeConfigs on a BROKER_LOGGER resource."""
    out = {ROOT: logging.getLogger().getEffectiveLevel()}
    manager = logging.Logger.manager
    names = [n for n in manager.loggerDict if n.startswith(("kafkalite", "kafka."))]
    for name in sorted({*names, REQUEST_LOGGER}):
        out[name] = logging.getLogger(name).getEffectiveLevel()
    return out


def set_level(name: str, level: str | None) -> None:
    """Set one logger's level (None: unset, so it follows its parent), as IncrementalAlterConfigs
    SET / DELETE on a BROKER_LOGGER resource does."""
    if name == ROOT:
        if level is None:
            raise LogLevelError("the root logger's level cannot be removed, only set")
        logging.getLogger().setLevel(level_of(level))
        return
    if not name or name.startswith(".") or name.endswith("."):
        raise LogLevelError(f"{name!r} is not a logger name")
    logging.getLogger(name).setLevel(logging.NOTSET if level is None else level_of(level))


def log_request(ctx: RequestContext, api_name: str, request_size: int) -> None:
    """One line per request for `kafka.request.logger` at DEBUG (the caller checks the level)."""
    elapsed_ms = (time.monotonic_ns() - ctx.received_ns) / 1e6
    principal = getattr(ctx, "principal", None)
    request_log.debug(
        "%s v%d from %s (client %s, principal %s, correlation %d): %d bytes, %.3f ms",
        api_name,
        ctx.api_version,
        getattr(ctx.connection, "peer", "?"),
        ctx.client_id or "",
        getattr(principal, "name", "?") if principal is not None else "?",
        ctx.header.correlation_id,
        request_size,
        elapsed_ms,
        extra={
            "fields": {
                "api": api_name,
                "version": ctx.api_version,
                "client_id": ctx.client_id or "",
                "peer": str(getattr(ctx.connection, "peer", "")),
                "bytes": request_size,
                "elapsed_ms": round(elapsed_ms, 3),
            }
        },
    )
