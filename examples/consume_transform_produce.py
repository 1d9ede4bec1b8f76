"""Exactly-once consume-transform-produce with the kafkalite client: each batch read (read_committed, in a
group) is transformed, written and its offsets committed in one transaction, so every input lands once.

    kafkalite serve &
    python examples/consume_transform_produce.py --input words --output WORDS --group upper --transactional-id upper-1
"""

from __future__ import annotations

import argparse
import sys
import time

from kafkalite.client import KafkaConsumer, KafkaProducer, TopicPartition
from kafkalite.client.errors import FatalProducerError, KafkaClientError
from kafkalite.protocol.errors import KafkaError


def transform(value: bytes | None) -> bytes | None:
    """The work itself: upper-case the value (a None value, a tombstone, stays one)."""
    return None if value is None else value.upper()


def run(args: argparse.Namespace) -> int:
    consumer = KafkaConsumer(
        args.input,
        bootstrap_servers=args.bootstrap_server,
        group_id=args.group,
        isolation_level="read_committed",  # never transform another producer's aborted records
        enable_auto_commit=False,  # offsets are committed by the transactions only
        auto_offset_reset="earliest",
    )
    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap_server, transactional_id=args.transactional_id
    )
    done = 0
    idle_since = time.monotonic()
    try:
        producer.init_transactions(60)  # fences an older instance with the same transactional id
        while args.max_records is None or done < args.max_records:
            left = None if args.max_records is None else args.max_records - done
            batch = consumer.poll(timeout_ms=500, max_records=left)
            if not batch:
                if args.idle_timeout and time.monotonic() - idle_since > args.idle_timeout:
                    break
                continue
            idle_since = time.monotonic()
            producer.begin_transaction()
            try:
                for records in batch.values():
                    for r in records:
                        producer.send(args.output, value=transform(r.value), key=r.key)
                offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
                producer.send_offsets_to_transaction(offsets, consumer.group_metadata(), 60)
                producer.commit_transaction(60)
            except FatalProducerError:
                raise  # fenced by a newer instance: this one must stop
            except (KafkaError, KafkaClientError) as exc:
                print(f"batch failed, aborting it: {exc}", file=sys.stderr)
                producer.abort_transaction(60)
                for tp, records in batch.items():  # read the batch again: nothing of it was kept
                    consumer.seek(TopicPartition(tp.topic, tp.partition), records[0].offset)
                continue
            done += sum(len(records) for records in batch.values())
            if args.verbose:
                print(f"committed {done} record(s)", flush=True)
    finally:
        producer.close()
        consumer.close(autocommit=False)
    print(f"transformed {done} record(s) from {args.input} to {args.output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--input", required=True, help="topic to read")
    parser.add_argument("--output", required=True, help="topic to write")
    parser.add_argument("--group", required=True, help="consumer group (holds the input offsets)")
    parser.add_argument("--transactional-id", required=True, help="stable per instance")
    parser.add_argument("--max-records", type=int, help="stop after this many (default: never)")
    parser.add_argument(
        "--idle-timeout", type=float, default=0, help="stop after this many idle seconds"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
