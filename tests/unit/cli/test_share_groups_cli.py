"""`kafkalite groups` on a KIP-932 share group against an embedded broker: list with type share, describe
(members, start offsets, lag), reset-offsets refused while a member is in and applied once it is Empty, and
delete-offsets; the group is driven over the wire (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge).
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.cli import groups
from kafkalite.cli.wire import EXIT_ERROR, CliError, WireClient
from kafkalite.protocol.schema import APIS
from kafkalite.records.builder import build_batch
from kafkalite.testing import Broker

HB: Any = APIS[76].request
FETCH: Any = APIS[78].request
ACK: Any = APIS[79].request


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    config = {
        "offsets.topic.num.partitions": "3",
        "share.coordinator.state.topic.num.partitions": "3",
    }
    with Broker(tmp_path_factory.mktemp("share-cli"), config=config) as b:
        yield b


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


def share_group_with_acks(b: Broker, c: WireClient) -> tuple[str, str, uuid.UUID, str]:
    """A 1-partition topic of 10 records and a share group (earliest) whose one member accepted 0-3."""
    topic, group = f"sc-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    b.create_topic(topic, 1)
    IAC: Any = APIS[44].request
    res = IAC.AlterConfigsResource
    r: Any = c.send(
        IAC(
            resources=[
                res(
                    resource_type=32,
                    resource_name=group,
                    configs=[
                        res.AlterableConfig(
                            name="share.auto.offset.reset", config_operation=0, value="earliest"
                        )
                    ],
                )
            ],
            validate_only=False,
        ),
        version=1,
    )
    assert r.responses[0].error_code == 0
    P: Any = APIS[0].request
    T = P.TopicProduceData
    blob = build_batch([(None, b"v%d" % i) for i in range(10)])
    r = c.send(
        P(
            transactional_id=None,
            acks=-1,
            timeout_ms=10000,
            topic_data=[
                T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=blob)])
            ],
        ),
        version=9,
    )
    assert r.responses[0].partition_responses[0].error_code == 0
    tid = c.metadata([topic]).topics[0].topic_id
    hb = c.send(
        HB(group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None,
           subscribed_topic_names=[topic]),
        version=1,
    )  # fmt: skip
    assert hb.error_code == 0
    member = str(hb.member_id)
    F = FETCH.FetchTopic
    for epoch, acks in ((0, []), (1, [(0, 3)])):
        part = F.FetchPartition(
            partition_index=0,
            acknowledgement_batches=[
                F.FetchPartition.AcknowledgementBatch(
                    first_offset=a, last_offset=z, acknowledge_types=[1]
                )
                for a, z in acks
            ],
        )
        r = c.send(
            FETCH(
                group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=500,
                min_bytes=1, max_bytes=1 << 20, max_records=4, batch_size=4,
                share_acquire_mode=1, is_renew_ack=False,  # RECORD_LIMIT: exactly 4
                topics=[F(topic_id=tid, partitions=[part])], forgotten_topics_data=[],
            ),
            version=2,
        )  # fmt: skip
        assert r.error_code == 0
    return topic, group, tid, member


def leave(c: WireClient, group: str, member: str) -> None:
    r = c.send(ACK(group_id=group, member_id=member, share_session_epoch=-1, topics=[]), version=1)
    assert r.error_code == 0
    hb = c.send(
        HB(group_id=group, member_id=member, member_epoch=-1, rack_id=None,
           subscribed_topic_names=None),
        version=1,
    )  # fmt: skip
    assert hb.error_code == 0


def test_share_group_list_describe_reset_and_delete_offsets(
    broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    with WireClient(broker.bootstrap_servers, timeout=15) as c:
        topic, group, _, member = share_group_with_acks(broker, c)

        assert cli(broker, "list", "-v") == (0, "")
        line = next(row for row in capsys.readouterr().out.splitlines() if group in row)
        assert "share" in line and "Stable" in line

        assert cli(broker, "describe", "--group", group) == (0, "")
        out = capsys.readouterr().out
        assert "share group (KIP-932), state Stable" in out and "1 member(s)" in out
        assert member in out and f"{topic}:0" in out
        assert "START-OFFSET" in out and "Total lag: 6" in out  # log end 10 - start 4

        # a member is in the group: the reset is refused before anything is planned
        rc, err = cli(broker, "reset-offsets", "--group", group, "--all-topics", "--to-latest")
        assert rc == 2 and "stop its consumers" in err
        rc, err = cli(broker, "delete-offsets", "--group", group, "--topic", topic)
        assert rc == 2 and "NON_EMPTY_GROUP" in err

        leave(c, group, member)

    # dry run changes nothing; --execute sets the start offset
    assert cli(broker, "reset-offsets", "--group", group, "--topic", topic, "--to-offset", "8") == (
        0,
        "",
    )
    assert "Dry run" in capsys.readouterr().out
    with WireClient(broker.bootstrap_servers, timeout=15) as c:
        cl = groups.Cluster(c)
        d = groups.describe_share_group(cl, group)
        cl.close()
    assert d is not None and [(o.start_offset, o.log_end, o.lag) for o in d.offsets] == [(4, 10, 6)]
    rc, err = cli(
        broker, "reset-offsets", "--group", group, "--topic", topic, "--to-offset", "8", "--execute"
    )
    assert rc == 0, err
    assert "Set 1 start offset(s)" in capsys.readouterr().out
    rc, err = cli(
        broker, "reset-offsets", "--group", group, "--all-topics", "--shift-by", "-3", "--execute"
    )
    assert rc == 0, err
    capsys.readouterr()
    assert cli(broker, "describe", "--group", group, "--offsets") == (0, "")
    out = capsys.readouterr().out
    assert "state Empty" in out and "Total lag: 5" in out  # start 5

    assert cli(broker, "delete-offsets", "--group", group, "--topic", topic) == (0, "")
    assert "Deleted the start offsets" in capsys.readouterr().out
    assert cli(broker, "describe", "--group", group) == (0, "")
    out = capsys.readouterr().out
    assert "no active members" in out and "no share-partition state yet" in out

    rc, err = cli(broker, "delete-offsets", "--group", "not-a-share-group", "--topic", topic)
    assert rc == 2 and "is not a share group" in err
