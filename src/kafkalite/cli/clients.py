"""`kafkalite produce` and `kafkalite consume`: console clients over the kafkalite client, flags as Kafka's.

Retries across broker restarts, a count of sent / failed (or processed) records, and no traceback on Ctrl-C.
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

from kafkalite.cli.wire import CliError

EXIT_INTERRUPTED = 130
_ACKS = {"all": "all", "-1": "all", "1": "1", "0": "0"}
_TRUE = ("true", "1", "yes", "on")


# -- shared helpers
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


# -- produce
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


def _produce(a: argparse.Namespace) -> int:
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
        return EXIT_INTERRUPTED if interrupted else 1
    for err in counts.errors:
        print(f"error: {err}", file=sys.stderr)
    sent = counts.sent
    failed = attempted - sent
    print(f"{sent} records sent, {failed} failed", file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    return 1 if failed else 0


# -- consume
def json_bytes(v: bytes | None) -> Any:
    """Text when the bytes are valid UTF-8, else {"base64": ...}; None stays null."""
    if v is None:
        return None
    try:
        return v.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(v).decode("ascii")}


class Formatter:
    """Kafka's console consumer output: [timestamp] [partition] [offset] [headers] [key] value, or JSON."""

    def __init__(self, props: dict[str, str], output: str) -> None:
        def flag(name: str, default: str = "false") -> bool:
            return props.get(name, default).lower() in _TRUE

        self.json = output == "json"
        self.print_ts = flag("print.timestamp")
        self.print_key = flag("print.key")
        self.print_value = flag("print.value", "true")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_headers = flag("print.headers")
        self.key_sep = props.get("key.separator", "\t")
        self.line_sep = props.get("line.separator", "\n")
        self.headers_sep = props.get("headers.separator", ",")
        self.header_key_sep = props.get("headers.key.separator", ":")
        self.null = props.get("null.literal", "null")

    def _text(self, v: bytes | None) -> str:
        return self.null if v is None else v.decode("utf-8", errors="replace")

    def format(self, rec: Any) -> str:
        if self.json:
            doc = {
                "topic": rec.topic,
                "partition": rec.partition,
                "offset": rec.offset,
                "timestamp": rec.timestamp,
                "timestamp_type": "LogAppendTime" if rec.timestamp_type == 1 else "CreateTime",
                "key": json_bytes(rec.key),
                "value": json_bytes(rec.value),
                "headers": [[k, json_bytes(v)] for k, v in rec.headers],
            }
            return json.dumps(doc, ensure_ascii=False) + "\n"
        cols: list[str] = []
        if self.print_ts:
            if rec.timestamp < 0:
                cols.append("NO_TIMESTAMP")
            else:
                kind = "LogAppendTime" if rec.timestamp_type == 1 else "CreateTime"
                cols.append(f"{kind}:{rec.timestamp}")
        if self.print_partition:
            cols.append(f"Partition:{rec.partition}")
        if self.print_offset:
            cols.append(f"Offset:{rec.offset}")
        if self.print_headers:
            cols.append(
                self.headers_sep.join(
                    f"{k}{self.header_key_sep}{self._text(v)}" for k, v in rec.headers
                )
                if rec.headers
                else "NO_HEADERS"
            )
        if self.print_key:
            cols.append(self._text(rec.key))
        if self.print_value:
            cols.append(self._text(rec.value))
        return self.key_sep.join(cols) + self.line_sep


def _start_offset(text: str) -> int | str:
    t = text.strip().lower()
    if t in ("earliest", "latest"):
        return t
    try:
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid offset {text!r}: use earliest, latest or a number"
        ) from None


def _consumer_config(a: argparse.Namespace) -> dict[str, Any]:
    cfg = client_config(
        a.bootstrap_server, a.consumer_config, _flatten(a.consumer_property), "--consumer-property"
    )
    cfg.setdefault("client.id", "console-consumer")
    cfg.setdefault("allow.auto.create.topics", False)
    if a.group:
        cfg["group.id"] = a.group
    if a.isolation_level:
        cfg["isolation.level"] = a.isolation_level
    if a.from_beginning:
        cfg["auto.offset.reset"] = "earliest"
    else:
        cfg.setdefault("auto.offset.reset", "latest")
    if not cfg.get("group.id"):
        cfg["enable.auto.commit"] = False
    return cfg


def _place(consumer: Any, a: argparse.Namespace) -> None:
    """assign() when --partition / --offset / --timestamp or no group, else subscribe() (group commits)."""
    from kafkalite.client import TopicPartition

    manual = a.partition is not None or a.offset is not None or a.timestamp is not None
    if a.group and not manual:
        consumer.subscribe([a.topic])
        return
    found = consumer.partitions_for_topic(a.topic)
    if not found:
        raise CliError(f"topic {a.topic} not found")
    if a.partition is not None and a.partition not in found:
        raise CliError(f"topic {a.topic} has partitions 0..{max(found)}")
    parts = [
        TopicPartition(a.topic, p)
        for p in ([a.partition] if a.partition is not None else sorted(found))
    ]
    consumer.assign(parts)
    if a.timestamp is not None:
        hits = consumer.offsets_for_times({tp: a.timestamp for tp in parts})
        ends = consumer.end_offsets(parts)
        for tp in parts:
            hit = hits.get(tp)
            consumer.seek(tp, hit.offset if hit is not None else ends[tp])
    elif a.offset == "earliest":
        consumer.seek_to_beginning(*parts)
    elif a.offset == "latest":
        consumer.seek_to_end(*parts)
    elif isinstance(a.offset, int):
        if a.offset >= 0:
            ends = consumer.end_offsets(parts)
            starts = consumer.beginning_offsets(parts)
            for tp in parts:
                if not starts[tp] <= a.offset <= ends[tp]:
                    raise CliError(
                        f"offset {a.offset} is out of range for {tp.topic}-{tp.partition}: "
                        f"valid offsets are {starts[tp]} to {ends[tp]} (the log start and its end; "
                        "the end waits for the next record)"
                    )
                consumer.seek(tp, a.offset)
        else:  # a kafkalite extension: that many records before the end
            ends = consumer.end_offsets(parts)
            starts = consumer.beginning_offsets(parts)
            for tp in parts:
                consumer.seek(tp, max(starts[tp], ends[tp] + a.offset))
    elif not a.group:  # no group, no committed offsets: the start is --from-beginning or the end
        if a.from_beginning:
            consumer.seek_to_beginning(*parts)
        else:
            consumer.seek_to_end(*parts)


def _consume(a: argparse.Namespace) -> int:
    from kafkalite.client import KafkaConsumer

    if a.format == "json":
        a.output = "json"
    props = parse_pairs(_flatten(a.property), "--property")
    if a.format == "kv":
        props.setdefault("print.key", "true")
    if a.separator is not None:
        props.setdefault("key.separator", a.separator)
    fmt = Formatter(props, a.output)
    cfg = _consumer_config(a)
    count = 0
    interrupted = False
    failure: str | None = None
    consumer: Any = None
    out = sys.stdout
    _sigint_raises()
    try:
        try:
            consumer = KafkaConsumer(config=cfg)
            _place(consumer, a)
        except (CliError, KeyboardInterrupt):
            raise
        except Exception as exc:
            raise CliError(f"cannot start the consumer: {exc}") from None
        idle_since = time.monotonic()
        while a.max_messages is None or count < a.max_messages:
            left = None if a.max_messages is None else a.max_messages - count
            try:
                batch = consumer.poll(200, max_records=left)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                failure = f"{type(exc).__name__}: {exc}"
                break
            if not batch:
                if a.timeout_ms and (time.monotonic() - idle_since) * 1000 >= a.timeout_ms:
                    print(
                        f"no message for {a.timeout_ms} ms: stopping (--timeout-ms)",
                        file=sys.stderr,
                    )
                    break
                continue
            idle_since = time.monotonic()
            for recs in batch.values():
                for rec in recs:
                    count += 1  # before the write: an interrupt right after it still counts it
                    out.write(fmt.format(rec))
            out.flush()
    except KeyboardInterrupt:
        interrupted = True
    except BrokenPipeError:
        pass
    finally:
        _sigint_ignored()
        if consumer is not None:
            try:
                consumer.close()
            except Exception as exc:
                print(f"error: closing the consumer: {exc}", file=sys.stderr)
        try:
            out.flush()
        except (BrokenPipeError, OSError):
            pass
    if consumer is not None:
        if failure is not None:
            print(f"error: {failure}", file=sys.stderr)
        print(f"Processed a total of {count} messages", file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    return 1 if failure else 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "produce",
        help="produce lines from stdin or a file (as kafka-console-producer)",
        description="Each input line is one record. Prints 'N records sent, M failed' to stderr at the "
        "end; exits 0 when all were sent, 1 when some failed, 130 on Ctrl-C.",
    )
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    p.add_argument("--topic", required=True)
    p.add_argument("--file", help="read this file instead of stdin")
    p.add_argument(
        "--property",
        action="append",
        nargs="+",
        metavar="KEY=VALUE",
        help="line parsing: parse.key, key.separator, parse.headers, headers.delimiter, "
        "headers.separator, headers.key.separator, null.marker, ignore.error",
    )
    p.add_argument(
        "--producer-property",
        action="append",
        nargs="+",
        metavar="KEY=VALUE",
        help="a producer configuration (Kafka's names)",
    )
    p.add_argument(
        "--producer.config", dest="producer_config", metavar="FILE", help="producer properties file"
    )
    p.add_argument("--acks", type=_acks, help="all, -1, 0 or 1 (default all)")
    p.add_argument(
        "--compression-codec",
        "--compression",
        nargs="?",
        const="gzip",
        metavar="CODEC",
        help="none, gzip (when given without a value), snappy, lz4 or zstd",
    )
    p.add_argument("--sync", action="store_true", help="wait for each record's acknowledgement")
    p.add_argument(
        "--retry-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="keep retrying a record (broker down or restarting) this long (default 60)",
    )
    p.add_argument("--partition", type=int, help="send every record to this partition")
    p.add_argument(
        "--key-separator", help="shorthand for --property parse.key=true key.separator=S"
    )
    p.add_argument(
        "--header",
        action="append",
        metavar="KEY=VALUE",
        help="a header on every record (repeatable)",
    )
    p.set_defaults(func=_produce)

    q = sub.add_parser(
        "consume",
        help="print records of a topic (as kafka-console-consumer)",
        description="Prints 'Processed a total of N messages' to stderr at the end; Ctrl-C closes "
        "cleanly (committing offsets with --group) and exits 130.",
    )
    q.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    q.add_argument("--topic", required=True)
    q.add_argument("--group", help="consumer group: subscribe, and commit offsets")
    q.add_argument("--partition", type=int, help="read only this partition (no rebalancing)")
    g = q.add_mutually_exclusive_group()
    g.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset when there is no committed one",
    )
    g.add_argument(
        "--offset",
        type=_start_offset,
        help="earliest, latest or an offset (negative: that many before the end)",
    )
    g.add_argument("--timestamp", type=int, help="start at the first record at/after this epoch-ms")
    q.add_argument("--max-messages", type=int, help="stop after this many records")
    q.add_argument(
        "--timeout-ms",
        type=int,
        default=0,
        help="stop when no record came for this long (0: never)",
    )
    q.add_argument("--isolation-level", choices=["read_committed", "read_uncommitted"])
    q.add_argument(
        "--property",
        action="append",
        nargs="+",
        metavar="KEY=VALUE",
        help="output: print.key, print.value, print.timestamp, print.headers, print.partition, "
        "print.offset, key.separator, line.separator, headers.separator, headers.key.separator, null.literal",
    )
    q.add_argument(
        "--consumer-property",
        action="append",
        nargs="+",
        metavar="KEY=VALUE",
        help="a consumer configuration (Kafka's names)",
    )
    q.add_argument(
        "--consumer.config", dest="consumer_config", metavar="FILE", help="consumer properties file"
    )
    q.add_argument(
        "--output",
        choices=["text", "json"],
        default="text",
        help="json: one object per record (headers as [name, value] pairs; bytes that are not "
        'UTF-8 as {"base64": ...})',
    )
    q.add_argument("--format", choices=["value", "kv", "json"], help=argparse.SUPPRESS)
    q.add_argument("--separator", help=argparse.SUPPRESS)
    q.set_defaults(func=_consume)
