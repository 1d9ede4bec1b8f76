"""What the console clients and the perf tools share: properties files, KEY=VALUE pairs, the client
config built from flags, acks spellings, and how Ctrl-C interrupts or is ignored.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterable
from typing import Any

from kafkalite.cli.wire import CliError

EXIT_INTERRUPTED = 130
_ACKS = {"all": "all", "-1": "all", "1": "1", "0": "0"}
_TRUE = ("true", "1", "yes", "on")


def load_properties(path: str) -> dict[str, str]:
    """A Java .properties file (`k=v` or `k: v` lines, `#` / `!` comments) as a dict."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for raw in fh:
                line = raw.strip()
                if not line or line[0] in "#!":
                    continue
                cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
                if cut < 0:
                    out[line] = ""
                else:
                    out[line[:cut].strip()] = line[cut + 1 :].strip()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    return out


def parse_pairs(items: Iterable[str] | None, what: str) -> dict[str, str]:
    """`k=v` arguments (repeatable, or several after one flag) as a dict."""
    out: dict[str, str] = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise CliError(f"{what} {item!r} must look like KEY=VALUE")
        out[k.strip()] = v
    return out


def client_config(
    bootstrap: str, config_file: str | None, overrides: Iterable[str] | None, what: str
) -> dict[str, Any]:
    """bootstrap.servers, then the properties file, then `--xxx-property k=v` (later wins)."""
    cfg: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if config_file:
        cfg.update(load_properties(config_file))
    cfg.update(parse_pairs(overrides, what))
    return cfg


def _flatten(items: list[list[str]] | None) -> list[str]:
    return [x for group in items or [] for x in group]


def _sigint_raises() -> None:
    """Ctrl-C raises KeyboardInterrupt here even if the parent process ignored SIGINT."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _sigint_ignored() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _acks(value: str) -> str:
    acks = _ACKS.get(value.strip().lower())
    if acks is None:
        raise argparse.ArgumentTypeError(f"invalid acks {value!r}: use all, -1, 0 or 1")
    return acks
