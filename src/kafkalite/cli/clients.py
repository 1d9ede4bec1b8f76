"""`kafkalite produce` and `kafkalite consume`: their command-line flags, as Kafka's console clients'.

The clients themselves are cli.console_producer and cli.console_consumer; what they share is cli.client_options.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafkalite.cli import console_consumer, console_producer
from kafkalite.cli.client_options import _acks


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "produce",
        help="produce lines from stdin or a file (as kafka-console-producer)",
        description="Each input line is one record. Prints 'N records sent, M failed' to stderr at the "
        "end; exits 0 when all were sent, 2 when some failed, 130 on Ctrl-C.",
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
    p.set_defaults(func=console_producer.run)

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
        type=console_consumer.start_offset,
        help="earliest, latest or an offset (negative: that many before the end)",
    )
    g.add_argument("--timestamp", type=int, help="start at the first record at/after this epoch-ms")
    q.add_argument("--max-messages", type=int, help="stop after this many records")
    q.add_argument(
        "--timeout-ms",
        type=int,
        default=0,
        help="stop when no record came for this long (0: never); as Kafka's console consumer, "
        "it says so on stderr, prints the count and exits 0",
    )
    q.add_argument("--isolation-level", choices=["read_committed", "read_uncommitted"])
    q.add_argument(
        "--filter",
        metavar="EXPR",
        help="only records matching this SQL92-subset expression over key, timestamp, offset and "
        "headers (e.g. \"key = 'user-42' AND headers.region IN ('eu', 'us')\"); the broker filters, "
        "or the client when the broker does not (docs/fetch-filter.md)",
    )
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
    q.set_defaults(func=console_consumer.run)
