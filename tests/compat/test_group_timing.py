"""Issue 16, classic-group timing: four kafka-python consumers started together on a four-partition
topic, each polling 100 ms at a time in its own thread, all hold an assignment of one generation that
covers the topic well within 15 s. The broker runs in its own process with its default settings
(group.initial.rebalance.delay.ms 3000), as a new user would start it.

Measured on this design (2 shared cores): 6.1-6.3 s typically (twice the initial delay, as Kafka),
9.2 s when kafka-python's leader sends an extra JoinGroup; see group_timing_support.py (the
reproducer) and kafka_python_join_bugs.py (the client bugs that cost the extra rounds).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from group_timing_support import broker_process, create_topic, run_once

pytest.importorskip("kafka")

pytestmark = [pytest.mark.compat, pytest.mark.slow]

RUNS = 2
PARTITIONS = 4


@pytest.fixture(scope="module")
def own_process_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = Path(tmp_path_factory.mktemp("group-timing")) / "data"
    with broker_process(data, "num.partitions=1") as bootstrap:
        yield bootstrap


def test_four_kafka_python_consumers_settle_within_15_s(own_process_broker: str) -> None:
    for _ in range(RUNS):
        topic = f"timing-{uuid.uuid4().hex[:8]}"
        create_topic(own_process_broker, topic, PARTITIONS)
        result = run_once(own_process_broker, topic, PARTITIONS, members=4, deadline_s=15.0)
        assert result.settled_s is not None, result.describe()
        assert not any(m.error for m in result.members), result.describe()
