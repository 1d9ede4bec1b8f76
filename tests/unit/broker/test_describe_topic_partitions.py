"""DescribeTopicPartitions (KIP-966) over the wire: pages of response_partition_limit partitions
resumed from the cursor, refusals of a bad cursor, unknown and invalid topics, listing every topic."""

from __future__ import annotations

from pathlib import Path

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.testing import Broker

R = APIS[75].request
ALL_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # no authorizer: all


def describe(c, names, limit=2000, cursor=None):  # type: ignore[no-untyped-def]
    req = R(
        topics=[R.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else R.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )
    return c.send(req, version=0)


def pages(c, names, limit):  # type: ignore[no-untyped-def]
    """Every page until no cursor: [(topic, [partition indexes]) per page]."""
    out, cursor = [], None
    while True:
        r = describe(c, names, limit, cursor)
        out.append([(t.name, [p.partition_index for p in t.partitions]) for t in r.topics])
        if r.next_cursor is None:
            return out
        cursor = (r.next_cursor.topic_name, r.next_cursor.partition_index)
        assert len(out) < 20


def test_pages_follow_the_cursor(broker, client, topic):
    a, b, c = f"{topic}-a", f"{topic}-b", f"{topic}-c"
    broker.create_topic(a, 3)
    broker.create_topic(b, 2)
    broker.create_topic(c, 1)
    assert pages(client, [c, a, b], 2) == [
        [(a, [0, 1])],
        [(a, [2]), (b, [0])],
        [(b, [1]), (c, [0])],
    ]
    assert pages(client, [a, b, c], 3) == [[(a, [0, 1, 2])], [(b, [0, 1]), (c, [0])]]
    # a page that ends exactly with a topic points at the next topic's first partition
    r = describe(client, [a, b, c], 5)
    assert [t.name for t in r.topics] == [a, b]
    assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == (c, 0)
    # a limit below 1 still answers one partition at a time (no endless loop)
    r = describe(client, [a], 0)
    assert [p.partition_index for p in r.topics[0].partitions] == [0]
    assert r.next_cursor.partition_index == 1
    whole = describe(client, [a]).topics[0]
    assert whole.error_code == 0 and whole.topic_id == broker.server.metadata_store.get(a).topic_id
    assert not whole.is_internal
    assert whole.topic_authorized_operations == ALL_TOPIC_OPERATIONS
    p0 = whole.partitions[0]
    assert (p0.error_code, p0.leader_id, p0.replica_nodes, p0.isr_nodes) == (0, 0, [0], [0])
    assert p0.eligible_leader_replicas == [] and p0.last_known_elr == []
    assert p0.offline_replicas == []


def test_unknown_and_invalid_topics_and_bad_cursors(broker, client, topic):
    broker.create_topic(topic, 1)
    r = describe(client, [topic, f"{topic}-missing", "bad name!"])
    by = {t.name: t for t in r.topics}
    assert by[topic].error_code == 0
    assert by[f"{topic}-missing"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by["bad name!"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert r.next_cursor is None
    # the cursor topic must be among the named ones, its partition not negative
    for cursor in ((f"{topic}-other", 0), (topic, -1)):
        r = describe(client, [topic], cursor=cursor)
        assert [(t.name, t.error_code, t.partitions) for t in r.topics] == [
            (topic, ErrorCode.INVALID_REQUEST, [])
        ]
    # a cursor past the topic's last partition: nothing more of it
    r = describe(client, [topic], cursor=(topic, 5))
    assert r.topics[0].error_code == 0 and r.topics[0].partitions == []


def test_no_topics_named_lists_every_topic_from_the_cursor(tmp_path: Path) -> None:
    with Broker(tmp_path) as b, WireClient(b.bootstrap_servers, timeout=10) as c:
        b.create_topic("x1", 2)
        b.create_topic("x2", 1)
        names = [t.name for t in describe(c, []).topics]
        assert {"x1", "x2"} <= set(names) and names == sorted(names)
        r = describe(c, [], cursor=("x1", 1))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [
            ("x1", [1]),
            ("x2", [0]),
        ]
        internal = [t for t in describe(c, []).topics if t.name.startswith("__")]
        assert all(t.is_internal for t in internal)
