"""`kafkalite produce`: the console producer — lines from stdin (or a file) parsed into keys, values and
headers as Kafka's console producer reads them, sent with retries across broker restarts, counted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

from kafkalite.cli.client_options import (
    _TRUE,
    EXIT_INTERRUPTED,
    _acks,
    _flatten,
    _sigint_ignored,
    _sigint_raises,
    client_config,
    parse_pairs,
)
from kafkalite.cli.wire import EXIT_ERROR, CliError


class LineReader:
    """Splits input lines into (key, value, headers) as Kafka's console producer does with
    parse.key / key.separator / parse.headers / headers.delimiter / headers.separator /
    headers.key.separator / null.marker / ignore.error."""

    def __init__(self, props: dict[str, str]) -> None:
        known = {
            "parse.key",
            "key.separator",
            "parse.headers",
            "headers.delimiter",
            "headers.separator",
            "headers.key.separator",
            "null.marker",
            "ignore.error",
        }
        unknown = sorted(set(props) - known)
        if unknown:
            raise CliError(
                f"unknown --property {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        self.parse_key = props.get("parse.key", "false").lower() in _TRUE
        self.key_sep = props.get("key.separator", "\t").encode()
        self.parse_headers = props.get("parse.headers", "false").lower() in _TRUE
        self.headers_delim = props.get("headers.delimiter", "\t").encode()
        self.headers_sep = props.get("headers.separator", ",").encode()
        self.header_key_sep = props.get("headers.key.separator", ":").encode()
        marker = props.get("null.marker")
        self.null_marker = None if marker is None else marker.encode()
        self.ignore_error = props.get("ignore.error", "false").lower() in _TRUE
        for name, sep in (
            ("key.separator", self.key_sep),
            ("headers.delimiter", self.headers_delim),
            ("headers.separator", self.headers_sep),
            ("headers.key.separator", self.header_key_sep),
        ):
            if not sep:
                raise CliError(f"--property {name} must not be empty")

    def _null(self, b: bytes) -> bytes | None:
        return None if self.null_marker is not None and b == self.null_marker else b

    def parse(
        self, line: bytes
    ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        headers: list[tuple[str, bytes | None]] = []
        rest = line
        if self.parse_headers:
            head, sep, tail = rest.partition(self.headers_delim)
            if not sep:
                if not self.ignore_error:
                    raise ValueError(
                        f"no headers delimiter {self.headers_delim.decode()!r} in the line"
                    )
            else:
                rest = tail
                if self._null(head) is not None and head:
                    for item in head.split(self.headers_sep):
                        k, ksep, v = item.partition(self.header_key_sep)
                        name = k.decode("utf-8", errors="replace")
                        headers.append((name, self._null(v) if ksep else None))
        key: bytes | None = None
        if self.parse_key:
            k, sep, v = rest.partition(self.key_sep)
            if not sep:
                if not self.ignore_error:
                    raise ValueError(f"no key separator {self.key_sep.decode()!r} in the line")
                return None, self._null(rest), headers
            key, rest = self._null(k), v
        return key, self._null(rest), headers


class DeliveryCount:
    """Delivery reports of the producer's I/O thread: how many records landed or failed, the first errors."""

    def __init__(self) -> None:
        self.sent = 0
        self.failed = 0
        self.errors: list[str] = []

    def __call__(self, _md: Any, exc: BaseException | None) -> None:
        if exc is None:
            self.sent += 1
            return
        self.failed += 1
        if len(self.errors) < 5:
            self.errors.append(f"{type(exc).__name__}: {exc}")


def _lines(stream: IO[Any]) -> Iterator[bytes]:
    """Lines without their end (a text stream without a byte buffer, e.g. a StringIO, is encoded)."""
    for raw in stream:
        line = raw if isinstance(raw, bytes) else raw.encode()
        yield line.rstrip(b"\n").rstrip(b"\r")


def _producer_config(a: argparse.Namespace) -> dict[str, Any]:
    cfg = client_config(
        a.bootstrap_server, a.producer_config, _flatten(a.producer_property), "--producer-property"
    )
    cfg.setdefault("client.id", "console-producer")
    retry_ms = max(1, int(a.retry_timeout * 1000))
    cfg.setdefault("delivery.timeout.ms", retry_ms)
    cfg.setdefault("max.block.ms", retry_ms)
    cfg.setdefault("request.timeout.ms", min(30000, retry_ms))
    cfg.setdefault("reconnect.backoff.max.ms", 1000)
    if a.acks is not None:
        cfg["acks"] = a.acks
    elif "acks" in cfg:
        cfg["acks"] = _acks(str(cfg["acks"]))
    if a.compression_codec is not None:
        cfg["compression.type"] = a.compression_codec
    if a.sync:
        cfg["linger.ms"] = 0
    return cfg


def _start_producer(cfg: dict[str, Any], retry_timeout: float) -> Any:
    """A KafkaProducer, retrying for `retry_timeout` s while no broker answers (one being restarted)."""
    from kafkalite.client import KafkaProducer

    deadline = time.monotonic() + retry_timeout
    warned = False
    while True:
        try:
            return KafkaProducer(cfg)
        except Exception as exc:
            retriable = bool(getattr(exc, "retriable", False))
            if not retriable or time.monotonic() >= deadline:
                raise CliError(f"cannot start the producer: {exc}") from None
            if not warned:
                print(f"waiting for a broker ({exc})", file=sys.stderr)
                warned = True
            time.sleep(0.5)


def run(a: argparse.Namespace) -> int:
    props = parse_pairs(_flatten(a.property), "--property")
    if a.key_separator is not None:  # the older kafkalite spelling of parse.key + key.separator
        props.setdefault("parse.key", "true")
        props.setdefault("key.separator", a.key_separator)
    reader = LineReader(props)
    fixed = [
        (k, v.encode() if sep else None) for k, sep, v in (h.partition("=") for h in a.header or [])
    ]
    cfg = _producer_config(a)
    counts = DeliveryCount()
    attempted = 0
    interrupted = False
    producer: Any = None
    stdin: IO[Any] = getattr(sys.stdin, "buffer", sys.stdin)
    stream = stdin
    _sigint_raises()
    try:
        if a.file:
            try:
                stream = open(a.file, "rb")  # noqa: SIM115 - closed below
            except OSError as exc:
                raise CliError(f"cannot read {a.file}: {exc.strerror or exc}") from None
        producer = _start_producer(cfg, a.retry_timeout)
        for n, line in enumerate(_lines(stream), 1):
            try:
                key, value, headers = reader.parse(line)
            except ValueError as exc:
                print(f"error: line {n}: {exc}", file=sys.stderr)
                attempted += 1
                counts.failed += 1
                continue
            attempted += 1
            try:
                fut = producer.send(
                    a.topic,
                    value,
                    key,
                    headers=(headers + fixed) or None,
                    partition=a.partition,
                    callback=counts,
                )
                if a.sync:
                    try:
                        fut.get()
                    except Exception:
                        pass  # counted by the delivery report
            except KeyboardInterrupt:
                raise
            except (
                Exception
            ) as exc:  # not queued (metadata not found in max.block.ms, too large...)
                counts(None, exc)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        _sigint_ignored()
        if producer is not None:
            try:
                producer.close(min(5.0, a.retry_timeout) if interrupted else None)
            except Exception as exc:
                print(f"error: closing the producer: {exc}", file=sys.stderr)
        if stream is not stdin:
            stream.close()
    if producer is None:
        return EXIT_INTERRUPTED if interrupted else EXIT_ERROR
    for err in counts.errors:
        print(f"error: {err}", file=sys.stderr)
    sent = counts.sent
    failed = attempted - sent
    print(f"{sent} records sent, {failed} failed", file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_ERROR if failed else 0
