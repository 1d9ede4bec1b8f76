"""Fixtures for broker unit tests: an embedded broker and a raw Kafka-protocol client to poke it with."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafkalite.cli.wire import WireClient
from kafkalite.testing import Broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("broker")) as b:
        yield b


@pytest.fixture
def client(broker: Broker) -> Iterator[WireClient]:
    with WireClient(broker.bootstrap_servers, timeout=10) as c:
        yield c


@pytest.fixture
def topic() -> str:
    return f"u-{uuid.uuid4().hex[:10]}"
