"""A confluent-kafka consumer in its own process for the KIP-848 tests: it prints one JSON line per
assignment change and per record, with the system's monotonic clock, and closes cleanly on SIGTERM.

Usage: python consumer_protocol_worker.py BOOTSTRAP GROUP TOPIC NAME [consumer|classic] [INSTANCE_ID]
"""

from __future__ import annotations

import json
import signal
import sys
import time

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic, name = sys.argv[1:5]
    protocol = sys.argv[5] if len(sys.argv) > 5 else "consumer"
    instance_id = sys.argv[6] if len(sys.argv) > 6 else None
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)

    def say(**fields: object) -> None:
        print(json.dumps({"t": time.monotonic(), "who": name, **fields}), flush=True)

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "auto.commit.interval.ms": 200,
    }
    if protocol == "classic":
        conf["partition.assignment.strategy"] = "cooperative-sticky"
    if instance_id is not None:
        conf["group.instance.id"] = instance_id
    c = Consumer(conf)
    c.subscribe(
        [topic],
        on_assign=lambda _c, ps: say(ev="assign", parts=[p.partition for p in ps]),
        on_revoke=lambda _c, ps: say(ev="revoke", parts=[p.partition for p in ps]),
        on_lost=lambda _c, ps: say(ev="lost", parts=[p.partition for p in ps]),
    )
    say(ev="start")
    while not stop:
        msg = c.poll(0.1)
        if msg is None:
            continue
        if msg.error():
            say(ev="error", error=str(msg.error()))
            continue
        say(ev="msg", p=msg.partition(), o=msg.offset())
    c.close()
    say(ev="closed")


if __name__ == "__main__":
    main()
