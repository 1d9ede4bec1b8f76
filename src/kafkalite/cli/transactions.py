"""`kafkalite transactions list|describe|abort|find-hanging`, in the spirit of kafka-transactions.sh: the
transaction coordinators' view of transactional ids, and aborting a hanging transaction on one partition.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from kafkalite.cli.groups import _table
from kafkalite.cli.wire import CliError, parse_bootstrap
from kafkalite.client.admin import KafkaAdminClient
from kafkalite.client.admin_transactions import AbortTransactionSpec, ProducerState
from kafkalite.client.errors import KafkaClientError
from kafkalite.client.structs import TopicPartition
from kafkalite.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")


@contextmanager
def _admin(a: argparse.Namespace) -> Iterator[KafkaAdminClient]:
    parse_bootstrap(a.bootstrap_server)  # a malformed address is a CliError before any connecting
    admin = KafkaAdminClient(
        bootstrap_servers=a.bootstrap_server,
        client_id="kafkalite-cli",
        default_api_timeout_ms=int(a.timeout * 1000),
    )
    try:
        yield admin
    finally:
        admin.close()


def _call(what: str, fn: Callable[[], T]) -> T:
    """Run one admin call, turning client errors into a sentence for a person."""
    try:
        return fn()
    except KafkaError as exc:
        raise CliError(f"{what}: {exc}") from None
    except (KafkaClientError, TimeoutError, OSError) as exc:
        raise CliError(f"{what}: {exc or type(exc).__name__}") from None


def _partitions_text(tps: list[TopicPartition]) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps)) or "-"


def _cmd_list(admin: KafkaAdminClient, a: argparse.Namespace) -> None:
    listed = _call("cannot list transactions", lambda: admin.list_transactions(a.state or None))
    if getattr(a, "output", "text") == "json":
        doc = [
            {
                "transactional_id": t.transactional_id,
                "coordinator": t.coordinator_id,
                "producer_id": t.producer_id,
                "state": t.state,
            }
            for t in listed
        ]
        print(json.dumps(doc))
        return
    _table(
        None,
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        [[t.transactional_id, t.coordinator_id, t.producer_id, t.state] for t in listed],
    )


def _cmd_describe(admin: KafkaAdminClient, a: argparse.Namespace) -> None:
    tid = a.transactional_id
    try:
        d = admin.describe_transactions([tid])[tid]
    except KafkaError as exc:
        if exc.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            raise CliError(f"transactional id {tid!r} does not exist") from None
        raise CliError(f"cannot describe transactional id {tid!r}: {exc}") from None
    except (KafkaClientError, TimeoutError, OSError) as exc:
        raise CliError(f"cannot describe transactional id {tid!r}: {exc}") from None
    start = d.transaction_start_time_ms
    duration = max(0, int(time.time() * 1000) - start) if start >= 0 else None
    _table(
        None,
        [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        [
            [
                d.coordinator_id,
                d.transactional_id,
                d.producer_id,
                d.producer_epoch,
                d.state,
                d.transaction_timeout_ms,
                start if start >= 0 else None,
                duration,
                _partitions_text(d.topic_partitions),
            ]
        ],
    )


def _producers(admin: KafkaAdminClient, tp: TopicPartition) -> list[ProducerState]:
    found = _call(
        f"cannot describe the producers of {tp.topic}-{tp.partition}",
        lambda: admin.describe_producers([tp]),
    )
    return found.get(tp, [])


def _cmd_abort(admin: KafkaAdminClient, a: argparse.Namespace) -> None:
    tp = TopicPartition(a.topic, a.partition)
    where = f"{tp.topic}-{tp.partition}"
    if a.start_offset is not None:
        if a.producer_id is not None:
            raise CliError(
                "give either --start-offset or --producer-id/--producer-epoch/--coordinator-epoch"
            )
        open_txns = [s for s in _producers(admin, tp) if s.current_transaction_start_offset >= 0]
        match = [s for s in open_txns if s.current_transaction_start_offset == a.start_offset]
        if not match:
            starts = ", ".join(
                f"{s.current_transaction_start_offset} (producer {s.producer_id})"
                for s in open_txns
            )
            raise CliError(
                f"no open transaction starts at offset {a.start_offset} on {where}"
                + (f"; open transactions start at {starts}" if starts else "; it has none")
            )
        s = match[0]
        spec = AbortTransactionSpec(
            tp, s.producer_id, s.producer_epoch, max(0, s.coordinator_epoch)
        )
    elif a.producer_id is not None:
        if a.producer_epoch is None or a.coordinator_epoch is None:
            raise CliError("--producer-id needs --producer-epoch and --coordinator-epoch")
        spec = AbortTransactionSpec(tp, a.producer_id, a.producer_epoch, a.coordinator_epoch)
    else:
        raise CliError(
            "name the transaction with --start-offset O (or --producer-id, --producer-epoch, --coordinator-epoch)"
        )
    _call(f"cannot abort the transaction on {where}", lambda: admin.abort_transaction(spec))
    print(
        f"Aborted the transaction of producer {spec.producer_id} (epoch {spec.producer_epoch}) on {where}"
        + (f", started at offset {a.start_offset}." if a.start_offset is not None else ".")
    )


def _cmd_find_hanging(admin: KafkaAdminClient, a: argparse.Namespace) -> None:
    """Open transactions on the partitions a broker leads that are older than the longest timeout:
    their coordinator should have ended them, so no marker is coming (a candidate for `abort`)."""

    def partitions() -> list[TopicPartition]:
        out = []
        for t in admin.describe_topics():
            for p in t.partitions:
                if a.broker_id is None or p.leader == a.broker_id:
                    out.append(TopicPartition(t.name, p.partition))
        return out

    tps = _call("cannot read the topics", partitions)
    if a.topic:
        tps = [tp for tp in tps if tp.topic == a.topic]
    found = _call("cannot describe producers", lambda: admin.describe_producers(tps)) if tps else {}
    now = int(time.time() * 1000)
    rows = []
    for tp, states in sorted(found.items()):
        for s in states:
            age = now - s.last_timestamp if s.last_timestamp >= 0 else 0
            if s.current_transaction_start_offset >= 0 and age > a.max_transaction_timeout * 60_000:
                rows.append(
                    [
                        tp.topic,
                        tp.partition,
                        s.producer_id,
                        s.producer_epoch,
                        s.coordinator_epoch,
                        s.current_transaction_start_offset,
                        s.last_timestamp,
                        age // 60_000,
                    ]
                )
    _table(
        None,
        [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ],
        rows,
    )


def _run(a: argparse.Namespace) -> int:
    with _admin(a) as admin:
        {
            "list": _cmd_list,
            "describe": _cmd_describe,
            "abort": _cmd_abort,
            "find-hanging": _cmd_find_hanging,
        }[a.action](admin, a)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "transactions",
        help="list and describe transactions, abort hanging ones (like kafka-transactions)",
    )
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds for each call (default 30)")
    acts = p.add_subparsers(dest="action", required=True)

    lst = acts.add_parser("list", help="every transactional id, from every broker's coordinator")
    lst.add_argument("--state", action="append", metavar="STATE", help="e.g. Ongoing; repeatable")
    lst.add_argument("--output", choices=("text", "json"), default="text")

    d = acts.add_parser("describe", help="one transactional id as its coordinator sees it")
    d.add_argument("--transactional-id", required=True)

    x = acts.add_parser(
        "abort", help="write an ABORT marker for a hanging transaction on one partition"
    )
    x.add_argument("--topic", required=True)
    x.add_argument("--partition", type=int, required=True)
    x.add_argument(
        "--start-offset",
        type=int,
        help="the offset where the open transaction starts (see describe-producers)",
    )
    x.add_argument("--producer-id", type=int)
    x.add_argument("--producer-epoch", type=int)
    x.add_argument("--coordinator-epoch", type=int)

    h = acts.add_parser(
        "find-hanging", help="open transactions older than --max-transaction-timeout minutes"
    )
    h.add_argument("--broker-id", type=int, help="only partitions this broker leads")
    h.add_argument("--topic")
    h.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=15,
        metavar="MINUTES",
        help="transaction.max.timeout.ms of the brokers, in minutes (default 15)",
    )

    for q in (lst, d, x, h):
        q.add_argument("--bootstrap-server", default=argparse.SUPPRESS)
        q.add_argument("--timeout", type=float, default=argparse.SUPPRESS)
    p.set_defaults(func=_run)
