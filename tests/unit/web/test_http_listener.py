"""The broker's HTTP listener: bound from `http.listeners` (port 0 picks a free one), started after the
broker and stopped before it; a URL kafkalite cannot serve is refused at startup with a clear error.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.broker.server import BrokerServer
from kafkalite.testing import Broker
from kafkalite.web import attach


def test_listener_serves_and_stops(tmp_path: Path) -> None:
    with Broker(tmp_path / "d", config={"http.listeners": "http://127.0.0.1:0"}) as b:
        url = b.http_url
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(url + "/no-such-page", timeout=5)
        assert info.value.code == 404
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/no-such-page", timeout=2)


def test_no_listener_without_the_setting(tmp_path: Path) -> None:
    with Broker(tmp_path / "d") as b:
        assert b.http is None
        with pytest.raises(RuntimeError):
            _ = b.http_url


@pytest.mark.parametrize("bad", ["https://127.0.0.1:8443", "127.0.0.1:8080", "http://host"])
def test_unservable_urls_are_refused(tmp_path: Path, bad: str) -> None:
    server = BrokerServer(BrokerConfig({"log.dirs": str(tmp_path / "d"), "http.listeners": bad}))
    with pytest.raises(ConfigError, match=r"http\.listeners"):
        attach(server)
