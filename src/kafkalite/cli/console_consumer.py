"""`kafkalite consume`: the console consumer — where to start (offsets, timestamps, a group), records
formatted as Kafka's console consumer prints them (or as JSON), a count of those processed.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from typing import Any

from kafkalite.cli.client_options import (
    _TRUE,
    EXIT_INTERRUPTED,
    _flatten,
    _sigint_ignored,
    _sigint_raises,
    client_config,
    parse_pairs,
)
from kafkalite.cli.wire import EXIT_ERROR, CliError


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


def start_offset(text: str) -> int | str:
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
    if a.filter:
        from kafkalite.filters import FilterError, compile_filter

        try:
            compile_filter(a.filter)
        except FilterError as exc:
            raise CliError(f"invalid --filter: {exc}") from None
        cfg["filter"] = a.filter
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


def run(a: argparse.Namespace) -> int:
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
    return EXIT_ERROR if failure else 0
