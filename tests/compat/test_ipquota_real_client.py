"""KIP-612 ip quotas with a real client: kafka-python's AlterClientQuotas / DescribeClientQuotas
with ip entities, then a burst of raw connections from 127.0.0.1 held to connection_creation_rate."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from test_quotas import alter, describe

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.schema import APIS
from kafkalite.testing import Broker

pytestmark = pytest.mark.compat

RATE = "connection_creation_rate"


@pytest.fixture(scope="module")
def ipbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("ipquota"), num_partitions=1) as b:
        yield b


@pytest.fixture
def admin(ipbroker: Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=ipbroker.bootstrap_servers)
    yield client
    client.close()


def still_open(sock: socket.socket) -> bool:
    """False once the broker has closed it (we sent nothing: it reads end of file)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def test_connections_over_the_ip_rate_are_closed(ipbroker: Broker, admin: KafkaAdminClient) -> None:
    b = ipbroker
    # the default for every other address, and 127.0.0.1's own quota
    assert alter(admin, [("ip", None)], {RATE: 1000}) == (0, None)
    assert alter(admin, [("ip", "127.0.0.1")], {RATE: 5}) == (0, None)
    assert describe(admin, [("ip", 2, None)], strict=True) == {(("ip", "127.0.0.1"),): {RATE: 5.0}}
    assert describe(admin, [("ip", 1, None)]) == {(("ip", None),): {RATE: 1000.0}}
    assert describe(admin, [("user", 2, None)]) == {}  # ip entities are not users
    time.sleep(1.1)  # the admin client's connections took tokens: start from a full bucket
    throttled_before = b.server.connection_quotas.throttled_per_ip_rate
    socks = [socket.create_connection((b.host, b.port), timeout=5) for _ in range(20)]
    try:
        time.sleep(1.5)  # throttled connections close after at most one quota window (1 s)
        open_now = [still_open(s) for s in socks]
        # one second's worth (5) at once, a little more if accepting them took a while
        assert 5 <= sum(open_now) <= 8, open_now
        closed = len(socks) - sum(open_now)
        assert b.server.connection_quotas.throttled_per_ip_rate - throttled_before == closed
    finally:
        for s in socks:
            s.close()
    time.sleep(0.3)
    with WireClient(b.bootstrap_servers, timeout=5):  # refilled: a client gets in and is served
        pass
    # lifted: a burst gets in whole
    assert alter(admin, [("ip", "127.0.0.1")], {RATE: None}) == (0, None)
    assert b.server.connection_quotas.ip_rate("127.0.0.1") == 1000
    socks = [socket.create_connection((b.host, b.port), timeout=5) for _ in range(20)]
    try:
        time.sleep(0.5)
        assert all(still_open(s) for s in socks)
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize(
    ("entity", "ops", "says"),
    [
        ([("ip", "10.0.0.1"), ("user", "x")], {RATE: 5}, "IP entity should not be used"),
        ([("ip", "not-an-ip")], {RATE: 5}, "not a valid IP"),
        ([("ip", "10.0.0.1")], {"producer_byte_rate": 5}, "only connection_creation_rate"),
        ([("user", "x")], {RATE: 5}, "quota of ip entities"),
        ([("ip", "10.0.0.1")], {RATE: 2.5}, "must be a INT value"),
        ([("ip", "10.0.0.1")], {RATE: -1}, "between 0 and"),
    ],
)
def test_bad_ip_alterations_are_refused(
    admin: KafkaAdminClient, entity: list[tuple[str, str | None]], ops: dict[str, float], says: str
) -> None:
    code, message = alter(admin, entity, ops)
    assert code == 42  # INVALID_REQUEST
    assert message is not None and says in message
    assert describe(admin, [("ip", 0, "10.0.0.1")]) == {}


def test_ip_quotas_survive_a_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("ipquota-restart")
    with Broker(data) as b:
        client = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            assert alter(client, [("ip", "10.20.30.40")], {RATE: 7}) == (0, None)
        finally:
            client.close()
    with Broker(data) as again:
        assert again.server.connection_quotas.ip_rate("10.20.30.40") == 7
        assert again.server.connection_quotas.ip_rate("10.20.30.41") >= 2**31 - 1
        with WireClient(again.bootstrap_servers, timeout=5) as c:
            resp = c.send(APIS[48].request(components=[], strict=False))
            assert [(e.entity_type, e.entity_name) for e in resp.entries[0].entity] == [
                ("ip", "10.20.30.40")
            ]
