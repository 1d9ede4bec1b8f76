"""`kafkalite groups` against an embedded broker: a real confluent-kafka group for list/describe/delete and
every reset-offsets mode, plus standalone commits over the wire for the pieces that need no third-party client.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from kafkalite.cli import groups
from kafkalite.cli.wire import EXIT_ERROR, CliError, WireClient
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch
from kafkalite.testing import Broker

# per partition: how many records, each with timestamp BASE_TS + i * 1000
SIZES = {0: 10, 1: 20, 2: 30}
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(
        tmp_path_factory.mktemp("groups-cli"),
        group_initial_rebalance_delay_ms=0,
        offsets_topic_num_partitions=3,
    ) as b:
        yield b


def new_topic(b: Broker) -> str:
    """A 3-partition topic holding SIZES[p] records in partition p, timestamps BASE_TS + i s."""
    name = f"gc-{uuid.uuid4().hex[:10]}"
    b.create_topic(name, 3)
    cls: Any = APIS[0].request
    data = [
        cls.TopicProduceData.PartitionProduceData(
            index=p,
            records=build_batch([(None, b"v%d" % i, [], BASE_TS + i * 1000) for i in range(n)]),
        )
        for p, n in SIZES.items()
    ]
    with WireClient(b.bootstrap_servers, timeout=10) as c:
        resp = c.send(
            cls(
                transactional_id=None,
                acks=-1,
                timeout_ms=10000,
                topic_data=[cls.TopicProduceData(name=name, partition_data=data)],
            )
        )
    assert all(p.error_code == 0 for t in resp.responses for p in t.partition_responses)
    return name


def cli(b: Broker, *argv: str) -> tuple[int, str]:
    """Parse and run `kafkalite groups ...` as main() would: (exit code, error message)."""
    parser = argparse.ArgumentParser(prog="kafkalite")
    sub = parser.add_subparsers(dest="command", required=True)
    groups.add_parser(sub)
    a = parser.parse_args(["groups", "--bootstrap-server", b.bootstrap_servers, *argv])
    try:
        return int(a.func(a) or 0), ""
    except CliError as exc:
        return EXIT_ERROR, str(exc)


def committed(b: Broker, group: str) -> dict[tuple[str, int], int]:
    with WireClient(b.bootstrap_servers, timeout=10) as c:
        cl = groups.Cluster(c)
        try:
            return groups.committed_offsets(cl, group)
        finally:
            cl.close()


def describe(b: Broker, group: str) -> groups.GroupDescription:
    with WireClient(b.bootstrap_servers, timeout=10) as c:
        return groups.describe_group(groups.Cluster(c), group)


def standalone_commit(b: Broker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    with WireClient(b.bootstrap_servers, timeout=10) as c:
        plan = [groups.OffsetReset(t, p, None, o) for (t, p), o in offsets.items()]
        groups.execute_reset(groups.Cluster(c), group, plan)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


# ---------------------------------------------------------------------------
# no third-party client


def test_parse_topic_specs_and_datetime() -> None:
    assert groups.parse_topic_specs(["a", "b:2,0,2"]) == [("a", None), ("b", [0, 2])]
    for bad in ["b:x", ":1", "b:"]:
        with pytest.raises(CliError):
            groups.parse_topic_specs([bad])
    assert groups.parse_datetime("2023-11-14T22:13:20+00:00") == 1_700_000_000_000
    assert groups.parse_datetime("2023-11-14T22:13:20.5Z") == 1_700_000_000_500
    assert groups.parse_datetime("1700000000000") == 1_700_000_000_000
    naive = datetime(2023, 11, 14, 22, 13, 20).astimezone()
    assert groups.parse_datetime("2023-11-14T22:13:20") == int(naive.timestamp() * 1000)
    with pytest.raises(CliError, match="ISO-8601"):
        groups.parse_datetime("yesterday")


def test_standalone_group_lag_and_errors(
    broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = new_topic(broker)
    group = f"solo-{uuid.uuid4().hex[:8]}"
    standalone_commit(broker, group, {(topic, 0): 3, (topic, 2): 30})
    d = describe(broker, group)
    assert d.state == "Empty" and d.members == []
    rows = {(o.topic, o.partition): (o.committed, o.log_end, o.lag) for o in d.offsets}
    assert rows == {(topic, 0): (3, 10, 7), (topic, 2): (30, 30, 0)}
    assert cli(broker, "describe", "--group", group) == (0, "")
    out = capsys.readouterr().out
    assert "state Empty" in out and "Total lag: 7" in out and "has no active members" in out

    rc, err = cli(broker, "describe", "--group", "no-such-group")
    assert rc == 2 and "'no-such-group' does not exist" in err
    rc, err = cli(broker, "delete", "--group", "no-such-group")
    assert rc == 2 and "GROUP_ID_NOT_FOUND" in err
    rc, err = cli(broker, "reset-offsets", "--group", group, "--topic", "nope", "--to-earliest")
    assert rc == 2 and "topic 'nope' does not exist" in err
    rc, err = cli(
        broker, "reset-offsets", "--group", group, "--topic", f"{topic}:7", "--to-earliest"
    )
    assert rc == 2 and "no partition 7" in err
    rc, err = cli(
        broker, "reset-offsets", "--group", "fresh-group", "--all-topics", "--to-earliest"
    )
    assert rc == 2 and "no committed offsets" in err
    rc, err = cli(
        broker, "reset-offsets", "--group", group, "--all-topics", "--shift-by", "1", "--execute"
    )
    assert rc == 0, err
    assert committed(broker, group) == {(topic, 0): 4, (topic, 2): 30}  # 31 clamped to the log end
    rc, err = cli(
        broker, "reset-offsets", "--group", group, "--topic", f"{topic}:1", "--shift-by", "1"
    )
    assert rc == 2 and "no committed offset" in err

    assert cli(broker, "delete", "--group", group) == (0, "")
    assert not describe(broker, group).exists
    assert committed(broker, group) == {}


# ---------------------------------------------------------------------------
# a real consumer group (confluent-kafka)


@pytest.mark.compat
def test_real_group_describe_delete_and_reset(
    broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = new_topic(broker)
    group = f"real-{uuid.uuid4().hex[:8]}"
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "client.id": "groups-cli-test",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.05)
        assert len(consumer.assignment()) == 3
        consumer.commit(
            offsets=[ck.TopicPartition(topic, 0, 4), ck.TopicPartition(topic, 1, 15)],
            asynchronous=False,
        )
        d = describe(broker, group)
        assert d.state == "Stable" and d.protocol_type == "consumer" and d.protocol == "range"
        (m,) = d.members
        assert m.client_id == "groups-cli-test" and m.host.endswith("127.0.0.1")
        assert m.assignment == [(topic, 0), (topic, 1), (topic, 2)]
        rows = {o.partition: (o.committed, o.log_end, o.lag, o.member) for o in d.offsets}
        assert rows == {0: (4, 10, 6, m), 1: (15, 20, 5, m), 2: (None, 30, None, m)}
        capsys.readouterr()
        assert cli(broker, "describe", "--group", group) == (0, "")
        out = capsys.readouterr().out
        assert "state Stable" in out and "groups-cli-test" in out and "Total lag: 11" in out

        assert cli(broker, "list") == (0, "")
        assert group in capsys.readouterr().out.split()
        assert cli(broker, "list", "--state", "stable") == (0, "")
        assert group in capsys.readouterr().out
        rc, err = cli(broker, "list", "--state", "Sleepy")
        assert rc == 2 and "unknown group state" in err

        rc, err = cli(broker, "delete", "--group", group)
        assert rc == 2 and "NON_EMPTY_GROUP" in err
        rc, err = cli(broker, "reset-offsets", "--group", group, "--all-topics", "--to-earliest")
        assert rc == 2 and "it is Stable" in err
        assert committed(broker, group) == {(topic, 0): 4, (topic, 1): 15}
    finally:
        consumer.close()  # LeaveGroup: the group becomes Empty with its offsets kept

    assert describe(broker, group).state == "Empty"
    assert cli(broker, "list", "--state", "Empty") == (0, "")
    assert group in capsys.readouterr().out
    assert cli(broker, "list", "--state", "Stable") == (0, "")
    assert group not in capsys.readouterr().out

    def reset(*argv: str) -> dict[int, int]:
        rc, err = cli(broker, "reset-offsets", "--group", group, *argv)
        assert rc == 0, err
        return {p: o for (t, p), o in committed(broker, group).items() if t == topic}

    # dry run (the default) prints the plan and changes nothing
    capsys.readouterr()
    assert reset("--all-topics", "--to-earliest") == {0: 4, 1: 15}
    out = capsys.readouterr().out
    assert "Dry run" in out and "NEW-OFFSET" in out
    assert reset("--topic", topic, "--to-latest", "--dry-run") == {0: 4, 1: 15}

    assert reset("--topic", topic, "--to-latest", "--execute") == {0: 10, 1: 20, 2: 30}
    assert reset("--topic", f"{topic}:0,1", "--to-offset", "5", "--execute") == {0: 5, 1: 5, 2: 30}
    assert reset("--topic", f"{topic}:0", "--to-offset", "100", "--execute") == {0: 10, 1: 5, 2: 30}
    assert reset("--topic", topic, "--shift-by", "-3", "--execute") == {0: 7, 1: 2, 2: 27}
    assert reset("--all-topics", "--shift-by", "-8", "--execute") == {0: 0, 1: 0, 2: 19}
    assert reset("--topic", f"{topic}:2", "--to-earliest", "--execute") == {0: 0, 1: 0, 2: 0}
    # the first record at or after the time: offset 5 (timestamps are BASE_TS + i s)
    at = iso(BASE_TS + 4500)
    assert reset("--topic", topic, "--to-datetime", at, "--execute") == {0: 5, 1: 5, 2: 5}
    late = iso(BASE_TS + 25_000)  # past every record of p0 and p1: their log end
    assert reset("--topic", topic, "--to-datetime", late, "--execute") == {0: 10, 1: 20, 2: 25}

    d = describe(broker, group)
    assert [(o.partition, o.lag) for o in d.offsets] == [(0, 0), (1, 0), (2, 5)]
    assert cli(broker, "delete", "--group", group) == (0, "")
    assert not describe(broker, group).exists
