"""The broker over real sockets: version negotiation, pipelining order, closing on bad frames, limits."""

from __future__ import annotations

import socket
import struct
import time

from broker_wire_helpers import encode_request, is_closed, read_frame

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.records.batch import build_batch
from kafkalite.testing import Broker


def connect(broker: Broker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10)


def test_api_versions_lists_exactly_the_dispatch_table(broker, client):
    table = broker.server.dispatch.version_ranges()
    assert sorted(client.versions.items()) == [(k, (lo, hi)) for k, lo, hi in table]
    for key in (0, 1, 2, 3, 18, 19, 20, 32):
        assert key in client.versions


def test_api_versions_v3_flexible(broker):
    req = APIS[18].request(client_software_name="kafkalite-test", client_software_version="1.0")
    with connect(broker) as s:
        s.sendall(encode_request(req, 3, 5))
        frame = read_frame(s)
    assert struct.unpack(">i", frame[:4])[0] == 5
    resp = APIS[18].response.decode(frame, 3, 4)  # ApiVersions answers with header v0 always
    assert resp.error_code == 0 and len(resp.api_keys) == len(broker.server.dispatch.entries)


def test_kip511_unsupported_api_versions_version_is_answered_in_v0(broker):
    with connect(broker) as s:
        body = struct.pack(">hhih", 18, 42, 9, 1) + b"x" + b"\x00" * 3
        s.sendall(struct.pack(">i", len(body)) + body)
        frame = read_frame(s)
    corr, err = struct.unpack(">ih", frame[:6])
    assert (corr, err) == (9, ErrorCode.UNSUPPORTED_VERSION)
    resp = APIS[18].response.decode(frame, 0, 4)
    assert (18, 0, 4) in [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]


def test_unknown_key_and_version_close_the_connection(broker, caplog):
    for key, ver in ((250, 0), (3, 77)):
        with connect(broker) as s:
            body = struct.pack(">hhih", key, ver, 1, 0)
            s.sendall(struct.pack(">i", len(body)) + body)
            assert is_closed(s)
    assert any("unsupported request api_key=250" in r.getMessage() for r in caplog.records)


def test_pipelined_requests_answered_in_order(broker, topic):
    md = APIS[3].request
    prod = APIS[0].request
    lo = APIS[2].request
    fetch = APIS[1].request
    frames = []
    corr_ids = []
    # a long-polling fetch first: later requests must still be answered after it, in order
    frames.append(
        encode_request(
            md(topics=[md.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True), 9, 100
        )
    )
    frames.append(
        encode_request(
            fetch(
                replica_id=-1,
                max_wait_ms=300,
                min_bytes=1 << 20,
                max_bytes=1 << 20,
                topics=[
                    fetch.FetchTopic(
                        topic=topic,
                        partitions=[
                            fetch.FetchTopic.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                            )
                        ],
                    )
                ],
                forgotten_topics_data=[],
            ),
            11,
            101,
        )
    )
    corr_ids += [100, 101]
    for i in range(20):
        corr = 102 + i
        if i % 2:
            td = prod.TopicProduceData(
                name=topic,
                partition_data=[
                    prod.TopicProduceData.PartitionProduceData(
                        index=0, records=build_batch([(None, b"%d" % i)])
                    )
                ],
            )
            frames.append(
                encode_request(
                    prod(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[td]), 9, corr
                )
            )
        else:
            t = lo.ListOffsetsTopic(
                name=topic,
                partitions=[
                    lo.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)
                ],
            )
            frames.append(encode_request(lo(replica_id=-1, topics=[t]), 5, corr))
        corr_ids.append(corr)
    with connect(broker) as s:
        s.sendall(b"".join(frames))
        got = [struct.unpack(">i", read_frame(s)[:4])[0] for _ in corr_ids]
    assert got == corr_ids


def test_acks_zero_produces_no_response(broker, topic, client):
    client.metadata([topic], auto_create=True)
    prod = APIS[0].request
    md = APIS[3].request
    td = prod.TopicProduceData(
        name=topic,
        partition_data=[
            prod.TopicProduceData.PartitionProduceData(index=0, records=build_batch([(None, b"x")]))
        ],
    )
    with connect(broker) as s:
        s.sendall(
            encode_request(
                prod(transactional_id=None, acks=0, timeout_ms=1000, topic_data=[td]), 9, 1
            )
            + encode_request(md(topics=[]), 1, 2)
        )
        assert struct.unpack(">i", read_frame(s)[:4])[0] == 2
    assert broker.server.get_log(topic, 0).log_end_offset == 1


def test_socket_request_max_bytes_enforced(tmp_path):
    with Broker(tmp_path, socket_request_max_bytes=1000) as b, connect(b) as s:
        s.sendall(struct.pack(">i", 2000) + b"\x00" * 100)
        assert is_closed(s)


def test_idle_connections_are_closed(tmp_path):
    with Broker(tmp_path, connections_max_idle_ms=200) as b, connect(b) as s:
        t0 = time.monotonic()
        assert is_closed(s, timeout=5)
        assert 0.15 < time.monotonic() - t0 < 4


def test_stop_waits_for_inflight_long_poll(tmp_path):
    b = Broker(tmp_path).start()
    fetch = APIS[1].request
    b.create_topic("lp")
    s = connect(b)
    s.sendall(
        encode_request(
            fetch(
                replica_id=-1,
                max_wait_ms=10_000,
                min_bytes=1,
                max_bytes=1 << 20,
                topics=[
                    fetch.FetchTopic(
                        topic="lp",
                        partitions=[
                            fetch.FetchTopic.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                            )
                        ],
                    )
                ],
                forgotten_topics_data=[],
            ),
            11,
            7,
        )
    )
    time.sleep(0.2)
    t0 = time.monotonic()
    b.stop()
    assert time.monotonic() - t0 < 5  # the long poll is woken, answered, and the broker stops
    frame = read_frame(s)
    assert struct.unpack(">i", frame[:4])[0] == 7
    s.close()


def test_half_closed_connection_is_answered_then_closed(broker):
    md = APIS[3].request
    with connect(broker) as s:
        s.sendall(encode_request(md(topics=[]), 1, 31))
        s.shutdown(socket.SHUT_WR)
        assert struct.unpack(">i", read_frame(s)[:4])[0] == 31
        assert is_closed(s)


def test_metadata_auto_creation_needs_the_request_and_the_broker(broker, client, topic, tmp_path):
    """allow_auto_topic_creation (v4+) false never creates; before v4 the field is absent and the
    broker's auto.create.topics.enable alone decides; with it off nothing is ever created."""
    md = APIS[3].request

    def ask(c, name, version, allow=True):  # type: ignore[no-untyped-def]
        req = md(topics=[md.MetadataRequestTopic(name=name)], allow_auto_topic_creation=allow)
        return c.send(req, version=version).topics[0]

    for v in (4, 9, 12):
        t = ask(client, f"{topic}-{v}", v, allow=False)
        assert t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not t.partitions
        assert f"{topic}-{v}" not in broker.topics()
    assert ask(client, f"{topic}-v3", 3).error_code == 0  # no such field before v4: allowed
    assert ask(client, f"{topic}-yes", 12).error_code == 0
    assert {f"{topic}-v3", f"{topic}-yes"} <= set(broker.topics())
    with Broker(tmp_path, auto_create_topics_enable=False) as closed:
        from kafkalite.cli.wire import WireClient

        with WireClient(closed.bootstrap_servers, timeout=10) as c:
            for v in (3, 12):
                assert ask(c, topic, v).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert topic not in closed.topics()
