"""Broker logging: levels per logger from properties, JSON lines, and Kafka's BROKER_LOGGER resource
over the wire (DescribeConfigs lists the loggers, IncrementalAlterConfigs turns request logging on and
off at runtime; bad levels and other brokers' ids are refused with Kafka's codes).
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.broker.config.log_config import REQUEST_LOGGER, JsonFormatter, configure
from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.schema import APIS
from kafkalite.testing import Broker

DESCRIBE = APIS[32].request
ALTER = APIS[44].request
BROKER_LOGGER = 8


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)
    logging.getLogger("kafkalite.test.x").setLevel(logging.NOTSET)


def test_levels_and_json_lines_from_properties(restore_logging: None) -> None:
    configure({"log.level": "WARN", "log.format": "json", "log.level.kafkalite.test.x": "DEBUG"})
    assert logging.getLogger().level == logging.WARNING
    assert logging.getLogger("kafkalite.test.x").level == logging.DEBUG
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logging.getLogger().addHandler(handler)
    logging.getLogger("kafkalite.test.x").debug("hello %s", "there")
    line = json.loads(stream.getvalue().splitlines()[-1])
    assert line["level"] == "DEBUG" and line["logger"] == "kafkalite.test.x"
    assert line["message"] == "hello there" and line["time"].endswith("Z")


def test_bad_settings_are_refused_at_startup() -> None:
    with pytest.raises(ConfigError, match="log level"):
        BrokerConfig({"log.level": "LOUD"})
    with pytest.raises(ConfigError, match="log level"):
        BrokerConfig({"log.level.kafka.request.logger": "chatty"})
    with pytest.raises(ConfigError, match="text or json"):
        BrokerConfig({"log.format": "xml"})


def _alter(c: WireClient, broker_id: str, configs: list[tuple[str, int, str | None]]) -> object:
    R = ALTER
    return c.send(
        R(
            resources=[
                R.AlterConfigsResource(
                    resource_type=BROKER_LOGGER,
                    resource_name=broker_id,
                    configs=[
                        R.AlterConfigsResource.AlterableConfig(name=n, config_operation=op, value=v)
                        for n, op, v in configs
                    ],
                )
            ],
            validate_only=False,
        ),
        version=1,
    ).responses[0]  # type: ignore[attr-defined]


def _describe(c: WireClient, broker_id: str) -> dict[str, str]:
    R = DESCRIBE
    r = c.send(
        R(
            resources=[
                R.DescribeConfigsResource(
                    resource_type=BROKER_LOGGER, resource_name=broker_id, configuration_keys=None
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        ),
        version=4,
    ).results[0]
    assert r.error_code == 0, r.error_message
    return {e.name: e.value for e in r.configs}


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_request_logging_switched_at_runtime(tmp_path: Path) -> None:
    seen = _Collect()
    logging.getLogger(REQUEST_LOGGER).addHandler(seen)
    with Broker(tmp_path / "d") as b, WireClient(b.bootstrap_servers, timeout=10) as c:
        bid = str(b.server.broker_id)
        loggers = _describe(c, bid)
        assert REQUEST_LOGGER in loggers and "root" in loggers
        assert loggers[REQUEST_LOGGER] == loggers["root"]  # unset: it follows the root
        r = _alter(c, bid, [(REQUEST_LOGGER, 0, "DEBUG")])
        assert r.error_code == 0, r.error_message  # type: ignore[attr-defined]
        assert _describe(c, bid)[REQUEST_LOGGER] == "DEBUG"
        seen.records.clear()
        c.metadata([])
        assert any("Metadata" in rec.getMessage() for rec in seen.records)
        r = _alter(c, bid, [(REQUEST_LOGGER, 0, "INFO")])
        assert r.error_code == 0  # type: ignore[attr-defined]
        seen.records.clear()
        c.metadata([])
        assert not seen.records
        r = _alter(c, bid, [(REQUEST_LOGGER, 1, None)])  # DELETE: follow the parent again
        assert r.error_code == 0  # type: ignore[attr-defined]
        loggers = _describe(c, bid)
        assert loggers[REQUEST_LOGGER] == loggers["root"]
        bad = _alter(c, bid, [(REQUEST_LOGGER, 0, "LOUD")])
        assert bad.error_code == ErrorCode.INVALID_CONFIG  # type: ignore[attr-defined]
        other = _alter(c, str(int(bid) + 1), [(REQUEST_LOGGER, 0, "DEBUG")])
        assert other.error_code == ErrorCode.INVALID_REQUEST  # type: ignore[attr-defined]
        append = _alter(c, bid, [(REQUEST_LOGGER, 2, "DEBUG")])
        assert append.error_code == ErrorCode.INVALID_REQUEST  # type: ignore[attr-defined]
    logging.getLogger(REQUEST_LOGGER).setLevel(logging.NOTSET)
    logging.getLogger(REQUEST_LOGGER).removeHandler(seen)
