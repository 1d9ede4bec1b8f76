"""Connection quotas as Kafka enforces them: max.connections (broker, listener; the inter-broker listener
protected), max.connections.per.ip and its overrides, max.connection.creation.rate, and their dynamic updates.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.broker.network.connection_quotas import (
    ConnectionLimits,
    RefusalLog,
    parse_ip_overrides,
)
from kafkalite.broker.server import BrokerServer
from kafkalite.cli.wire import CliError, WireClient
from kafkalite.protocol.schema import APIS
from kafkalite.testing import Broker

BROKER = 4  # ConfigResource type


def wire(b: Broker, timeout: float = 5.0, port: int | None = None) -> WireClient:
    """A connection that has had its ApiVersions answered (so the broker accepted it)."""
    return WireClient(f"127.0.0.1:{port or b.port}", timeout=timeout)


def refused(b: Broker, port: int | None = None) -> bool:
    """True when the broker closes a new connection without answering it."""
    try:
        wire(b, port=port).close()
    except (CliError, ConnectionResetError):  # reset: our request was still unread at the close
        return True
    return False


def wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def open_from_ip(b: Broker) -> int:
    return b.server.connection_quotas.per_ip.get("127.0.0.1", 0)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the tests below; each sets its limits with AlterConfigs (so every limit is
    also exercised as a dynamic config) and puts the defaults back."""
    with Broker(tmp_path_factory.mktemp("conn-limits")) as b:
        yield b


@contextlib.contextmanager
def limits(b: Broker, **configs: str) -> Iterator[None]:
    def set_to(props: dict[str, str]) -> None:
        # connections the test closed count until the broker has seen them close
        wait_until(lambda: b.server.connection_quotas.total == 0)
        with wire(b) as admin:
            assert _alter(admin, props) == 0
        wait_until(lambda: b.server.connection_quotas.total == 0)

    set_to({k.replace("_", "."): v for k, v in configs.items()})
    try:
        yield
    finally:
        set_to({})


def test_per_ip_limit_closes_the_extra_connection_and_frees_on_close(
    shared: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    b = shared
    with limits(b, max_connections_per_ip="3"):
        clients = [wire(b) for _ in range(3)]
        caplog.set_level(logging.WARNING, "kafkalite.broker.connection_quotas")
        before = b.server.connection_quotas.refused_per_ip
        for _ in range(5):
            assert refused(b)
        # one actionable line, not one per refusal
        lines = [
            r.getMessage() for r in caplog.records if "max.connections.per.ip=3" in r.getMessage()
        ]
        assert len(lines) == 1, lines
        assert "127.0.0.1" in lines[0]
        assert b.server.connection_quotas.refused_per_ip - before == 5
        clients.pop().close()
        wait_until(lambda: open_from_ip(b) == 2)
        again = wire(b)  # a slot is free again
        assert open_from_ip(b) == 3
        for c in [*clients, again]:
            c.close()


def test_per_ip_overrides(shared: Broker) -> None:
    b = shared
    with limits(b, max_connections_per_ip="1", max_connections_per_ip_overrides="127.0.0.1:3"):
        clients = [wire(b) for _ in range(3)]
        assert refused(b)
        for c in clients:
            c.close()


def test_broker_wide_limit_stops_accepting_until_a_connection_closes(shared: Broker) -> None:
    b = shared
    with limits(b, max_connections="2"):
        first, second = wire(b), wire(b)
        with pytest.raises(TimeoutError):
            wire(b, timeout=0.5)  # connected in the backlog, never answered: not accepted
        assert b.server.connection_quotas.total == 2
        first.close()
        third = wire(b)  # accepted once a slot freed (Kafka blocks, it does not refuse)
        assert b.server.connection_quotas.total <= 2
        third.close()
        second.close()


def test_listener_max_connections(shared: Broker) -> None:
    b = shared
    with limits(b, **{"listener.name.plaintext.max.connections": "1"}):
        c = wire(b)
        with pytest.raises(TimeoutError):
            wire(b, timeout=0.5)
        c.close()
        wire(b).close()


@pytest.mark.parametrize(
    "prop", ["max.connection.creation.rate", "listener.name.plaintext.max.connection.creation.rate"]
)
def test_connection_creation_rate_throttles_accepting(shared: Broker, prop: str) -> None:
    b = shared
    with limits(b, **{prop: "10"}):
        started = time.monotonic()
        for _ in range(20):  # a burst of 10, then 10 per second
            wire(b, timeout=10).close()
        elapsed = time.monotonic() - started
        assert elapsed >= 0.8, elapsed


def test_bad_values_are_refused_by_alter_configs(shared: Broker) -> None:
    with wire(shared) as admin:
        assert _alter(admin, {"max.connections.per.ip": "-1"}) != 0
        assert _alter(admin, {"max.connections.per.ip": "0"}) != 0  # 0 needs overrides
        assert _alter(admin, {"max.connections.per.ip.overrides": "x:y"}) != 0
        assert _alter(admin, {"listener.name.plaintext.max.connections": "many"}) != 0
    assert shared.server.connection_quotas.limits.per_ip == 2**31 - 1


def test_limits_are_described_as_dynamic(shared: Broker) -> None:
    d = APIS[32].request
    res = d.DescribeConfigsResource(
        resource_type=BROKER, resource_name="0", configuration_keys=None
    )
    with wire(shared) as admin:
        entries = {c.name: c for c in admin.send(d(resources=[res])).results[0].configs}
    for name in ("max.connections", "max.connections.per.ip", "max.connection.creation.rate"):
        assert entries[name].value == "2147483647"
        assert not entries[name].read_only
    assert not entries["max.connections.per.ip.overrides"].read_only


def test_inter_broker_listener_is_protected_at_max_connections(tmp_path: Path) -> None:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "max.connections": "2",
    }
    with Broker(tmp_path, config=props) as b:
        internal_port = next(
            lr.advertised.port for lr in b.server.listeners if lr.name == "INTERNAL"
        )
        c1 = wire(b)
        time.sleep(0.05)
        c2 = wire(b)
        c2.send(APIS[18].request(), version=0)  # c1 is now the least recently active
        inter = wire(b, port=internal_port)  # still accepted at the limit
        with pytest.raises((CliError, OSError)):
            c1.send(APIS[18].request(), version=0)  # closed to make room
        c2.send(APIS[18].request(), version=0)
        for c in (c1, c2, inter):
            c.close()


def _alter(client: WireClient, configs: dict[str, str]) -> int:
    alt = APIS[33].request
    res = alt.AlterConfigsResource(
        resource_type=BROKER,
        resource_name="0",
        configs=[
            alt.AlterConfigsResource.AlterableConfig(name=k, value=v) for k, v in configs.items()
        ],
    )
    return int(client.send(alt(resources=[res], validate_only=False)).responses[0].error_code)


def test_limits_parse_and_refuse_nonsense() -> None:
    limits = ConnectionLimits.from_props(
        {
            "max.connections": "100",
            "max.connections.per.ip.overrides": "127.0.0.1:5, [::1]:7",
            "listener.name.internal.max.connections": "9",
            "listener.name.internal.max.connection.creation.rate": "3",
        }
    )
    assert limits.max_connections == 100
    assert limits.ip_limit("127.0.0.1") == 5
    assert limits.ip_limit("::1") == 7
    assert limits.ip_limit("10.0.0.1") == 2**31 - 1
    assert limits.listener_max == {"INTERNAL": 9}
    assert limits.listener_rate == {"INTERNAL": 3}
    assert parse_ip_overrides("") == {}
    for bad in ("127.0.0.1", "127.0.0.1:x", ":5"):
        with pytest.raises(ConfigError):
            parse_ip_overrides(bad)
    with pytest.raises(ConfigError):
        ConnectionLimits.from_props({"max.connections.per.ip": "0"})
    with pytest.raises(ConfigError):  # a bad static value stops startup
        BrokerServer(BrokerConfig({"max.connections.per.ip.overrides": "nonsense"}))


def test_refusal_log_is_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "kafkalite.broker.connection_quotas")
    rl = RefusalLog(interval_s=0.2)
    for i in range(1000):
        rl.warn("k", "refused %d", i)
    time.sleep(0.25)
    rl.warn("k", "refused %d", 1000)
    # only this module's records: a client thread left by another test may log meanwhile
    msgs = [
        r.getMessage() for r in caplog.records if r.name == "kafkalite.broker.connection_quotas"
    ]
    assert len(msgs) == 2
    assert "999 more" in msgs[1]
