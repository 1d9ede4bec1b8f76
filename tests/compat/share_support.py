"""Helpers for the KIP-932 tests with confluent-kafka's ShareConsumer: group configs through the admin
client, explicit-acknowledgement consumers, polling until records arrive, and a held-records worker.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE
REJECT = AcknowledgeType.REJECT


def new_topic(bootstrap: str, partitions: int = 1, prefix: str = "share") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)


def produce(bootstrap: str, topic: str, n: int, *, start: int = 0, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    errors: list[Any] = []

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i in range(start, start + n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=partition,
                  on_delivery=done)  # fmt: skip
    assert p.flush(30) == 0
    assert not errors, errors


def consumer(bootstrap: str, group: str, **extra: Any) -> ShareConsumer:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "share.acknowledgement.mode": "explicit",
        "fetch.wait.max.ms": 200,
    }
    conf.update(extra)
    return ShareConsumer(conf)


def poll_until(
    c: ShareConsumer,
    handle: Callable[[Any], Any],
    done: Callable[[], bool],
    timeout: float = 30.0,
    commit: bool = True,
) -> None:
    """Poll, hand each record to `handle` (which acknowledges it), commit, until `done()`."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out waiting for share records"
        msgs = c.poll(0.5)
        for m in msgs:
            if m.error() is not None:
                continue
            handle(m)
        if len(msgs) and commit:
            c.commit_sync(30)


def hold_worker(bootstrap: str, group: str, topic: str) -> None:
    """A consumer that acquires records, says which, and holds them without acknowledging until it
    is killed (run as `python share_support.py hold BOOTSTRAP GROUP TOPIC`)."""
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    while True:
        msgs = [m for m in c.poll(0.5) if m.error() is None]
        if msgs:
            print("HELD " + " ".join(str(m.offset()) for m in msgs), flush=True)
            while True:
                time.sleep(1)


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        hold_worker(sys.argv[2], sys.argv[3], sys.argv[4])
