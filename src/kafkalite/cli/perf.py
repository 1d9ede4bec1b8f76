"""`kafkalite perf produce|consume`: load tests in the manner of kafka-producer-perf-test / kafka-consumer-perf-test.

confluent-kafka (librdkafka) drives them when importable, else the kafkalite client; `--client` picks one.
The commands' flags are here; the load tests themselves run in cli.producer_perf and cli.consumer_perf.
"""

from __future__ import annotations

from typing import Any

from kafkalite.cli import consumer_perf, producer_perf


def add_parser(sub: Any) -> None:
    perf = sub.add_parser("perf", help="load tests: perf produce / perf consume")
    which = perf.add_subparsers(dest="perf_command", required=True)

    p = which.add_parser(
        "produce",
        help="producer throughput and latency (as kafka-producer-perf-test)",
        description="Sends --num-records records (or for --duration seconds) of --record-size bytes; "
        "prints a line per reporting interval and a summary: records/s, MB/s, latency avg / p50 / "
        "p95 / p99 / p99.9 / max (send to delivery report).",
    )
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    p.add_argument("--topic", required=True)
    n = p.add_mutually_exclusive_group()
    n.add_argument("--num-records", type=int, help="how many records to send")
    n.add_argument("--duration", type=float, metavar="SECONDS", help="send for this long instead")
    p.add_argument("--record-size", type=int, default=100, help="bytes per record (default 100)")
    p.add_argument(
        "--throughput", type=float, default=-1, help="records/s to aim at (-1: as fast as possible)"
    )
    p.add_argument(
        "--producer-props",
        action="append",
        nargs="+",
        metavar="KEY=VALUE",
        help="producer configuration (Kafka's names)",
    )
    p.add_argument(
        "--producer.config", dest="producer_config", metavar="FILE", help="producer properties file"
    )
    p.add_argument("--acks", help="shorthand for --producer-props acks=...")
    p.add_argument("--compression", help="shorthand for --producer-props compression.type=...")
    p.add_argument("--batch-size", type=int, help="shorthand for --producer-props batch.size=...")
    p.add_argument("--linger-ms", type=int, help="shorthand for --producer-props linger.ms=...")
    p.add_argument(
        "--client",
        choices=["auto", "confluent", "kafkalite"],
        default="auto",
        help="auto: confluent-kafka when installed",
    )
    p.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    p.add_argument(
        "--latency-sample",
        type=int,
        default=16,
        metavar="N",
        help="confluent-kafka: a delivery report (latency, failure) on every Nth record (default 16; "
        "1: all, at about a third less rate); the kafkalite client times every record",
    )
    p.add_argument(
        "--output", choices=["text", "json"], default="text", help="json: the summary as one object"
    )
    p.set_defaults(func=producer_perf.run)

    c = which.add_parser(
        "consume",
        help="consumer throughput (as kafka-consumer-perf-test)",
        description="Consumes --messages records in a consumer group; prints MB and records consumed, "
        "MB/s, records/s, the rebalance time and the fetch time.",
    )
    c.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    c.add_argument("--topic", required=True)
    c.add_argument("--messages", type=int, required=True, help="how many records to consume")
    c.add_argument("--group", help="consumer group (default perf-consumer-<random>)")
    c.add_argument(
        "--timeout",
        type=int,
        default=10000,
        metavar="MS",
        help="give up when no record came for this long",
    )
    c.add_argument("--fetch-size", type=int, metavar="BYTES", help="max.partition.fetch.bytes")
    c.add_argument(
        "--from-latest", action="store_true", help="start at the end when the group has no offsets"
    )
    c.add_argument(
        "--consumer-props",
        action="append",
        nargs="+",
        metavar="KEY=VALUE",
        help="consumer configuration",
    )
    c.add_argument(
        "--consumer.config", dest="consumer_config", metavar="FILE", help="consumer properties file"
    )
    c.add_argument("--client", choices=["auto", "confluent", "kafkalite"], default="auto")
    c.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    c.add_argument(
        "--show-detailed-stats", action="store_true", help="a line per reporting interval"
    )
    c.add_argument("--output", choices=["text", "json"], default="text")
    c.set_defaults(func=consumer_perf.run)
