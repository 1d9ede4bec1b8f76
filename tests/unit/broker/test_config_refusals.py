"""Config that refuses mistakes: a table of bad broker configs and the one line each one stops with.

Also unknown-name warnings, --help-config / --version, the generated docs, and start-up errors a person can act on.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalite.broker.config.broker_config import (
    BROKER_CONFIGS,
    BrokerConfig,
    ConfigError,
    closest_config_name,
    log_startup_config,
)
from kafkalite.broker.config.config_docs import render_markdown, render_text
from kafkalite.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager

ROOT = Path(__file__).resolve().parents[3]

# properties -> a piece of the one-line message that names the property, the value and what is allowed
BAD_CONFIGS: list[tuple[dict[str, str], str]] = [
    ({"log.retention.hours": "-5"}, "log.retention.hours=-5: Value must be at least -1"),
    ({"group.consumer.migration.policy": "bidirectional"}, "migration.policy=bidirectional"),
    ({"log.retention.ms": "-2"}, "log.retention.ms=-2: Value must be at least -1"),
    ({"log.retention.minutes": "-7"}, "log.retention.minutes=-7: Value must be at least -1"),
    ({"log.retention.bytes": "-9"}, "log.retention.bytes=-9: Value must be at least -1"),
    ({"num.partitions": "0"}, "num.partitions=0: Value must be at least 1"),
    # a value not of the setting's type: Kafka's words and what was expected, never Python's
    (
        {"num.partitions": "three"},
        "num.partitions=three: Not a number of type INT (expected a whole number >= 1)",
    ),
    ({"num.partitions": "1.5"}, "num.partitions=1.5: Not a number of type INT (expected a whole"),
    ({"log.retention.hours": "1_000"}, "log.retention.hours=1_000: Not a number of type INT"),
    (
        {"log.segment.bytes": "4294967296"},
        "Not a number of type INT (expected a whole number in -2147483648..2147483647)",
    ),
    (
        {"log.retention.ms": "forever"},
        "log.retention.ms=forever: Not a number of type LONG (expected a whole number >= -1)",
    ),
    ({"broker.id": "x"}, "broker.id=x: Not a number of type INT (expected a whole number >= 0)"),
    (
        {"log.cleaner.min.cleanable.ratio": "half"},
        "Not a number of type DOUBLE (expected a number in 0..1)",
    ),
    ({"log.preallocate": "1"}, "log.preallocate=1: Expected value to be either true or false"),
    (
        {"log.message.format.version": "abc"},
        "log.message.format.version=abc: Version `abc` is not a valid version",
    ),
    ({"broker.id": "-1"}, "broker.id=-1: Value must be at least 0"),
    ({"log.segment.bytes": "10"}, "log.segment.bytes=10: Value must be at least 14"),
    ({"log.cleaner.min.cleanable.ratio": "1.5"}, "Value must be no more than 1"),
    ({"message.max.bytes": "-1"}, "message.max.bytes=-1: Value must be at least 0"),
    (
        {"auto.create.topics.enable": "yes"},
        "auto.create.topics.enable=yes: Expected value to be either true or false",
    ),
    ({"log.cleanup.policy": "delete,forever"}, "log.cleanup.policy=delete,forever: use delete or"),
    ({"compression.type": "brotli"}, "compression.type=brotli: use producer, uncompressed"),
    ({"log.message.timestamp.type": "Now"}, "use CreateTime or LogAppendTime"),
    ({"log.format": "xml"}, "log.format=xml: use text or json"),
    ({"log.level": "LOUD"}, "log.level=LOUD"),
    (
        {"security.inter.broker.protocol": "TLS"},
        "security.inter.broker.protocol=TLS: use PLAINTEXT",
    ),
    (
        {"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
        "advertised.listeners=PLAINTEXT://0.0.0.0:9092: 0.0.0.0 is not an address clients",
    ),
    (
        {"listeners": "PLAINTEXT://[::]:9092", "advertised.listeners": "PLAINTEXT://[::]:9092"},
        ":: is not an address clients can connect to",
    ),
    ({"listeners": "PLAINTEXT://127.0.0.1:70000"}, "port 70000 is not in 0..65535"),
    (
        {"listeners": "EXTERNAL://127.0.0.1:9092"},
        "listener EXTERNAL has no entry in listener.security",
    ),
    (
        {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://0.0.0.0:9092"},
        "PLAINTEXT and SSL both bind port 9092",
    ),
    (
        {"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"},
        "the name PLAINTEXT is used twice",
    ),
    (
        {"advertised.listeners": "OTHER://h:1"},
        "advertised.listeners names OTHER, which is not one of the listeners",
    ),
    (
        {"group.min.session.timeout.ms": "9000", "group.max.session.timeout.ms": "8000"},
        "group.min.session.timeout.ms=9000: must be <= group.max.session.timeout.ms (8000)",
    ),
    ({"quota.window.num": "0"}, "quota.window.num=0: Value must be at least 1"),
]


@pytest.mark.parametrize(("props", "needle"), BAD_CONFIGS, ids=lambda x: str(x)[:60])
def test_bad_config_is_one_line_naming_property_and_allowed(
    props: dict[str, str], needle: str
) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    message = str(info.value)
    assert needle in message
    assert "\n" not in message
    assert "invalid literal" not in message and "could not convert" not in message


def test_log_dir_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "plain-file"
    f.write_text("x")
    with pytest.raises(ConfigError, match=r"log.dirs=.*plain-file: not a directory"):
        BrokerConfig({"log.dirs": str(f)})


def test_every_declaration_has_type_default_doc_and_a_sane_range() -> None:
    for name, d in BROKER_CONFIGS.items():
        assert d.doc.strip(), name
        if d.default is not None and d.at_least is not None:
            assert float(d.default) >= d.at_least, name
    # retention and dynamic flags: the table says what AlterConfigs may change
    assert BROKER_CONFIGS["log.retention.ms"].read_only is False
    assert BROKER_CONFIGS["log.retention.hours"].read_only is True
    assert BROKER_CONFIGS["listeners"].read_only is True
    assert BrokerConfig().warnings == []


def test_unknown_names_get_the_closest_known_one(caplog: pytest.LogCaptureFixture) -> None:
    assert closest_config_name("num.partitons") == "num.partitions"
    assert closest_config_name("log.retention.hour") == "log.retention.hours"
    cfg = BrokerConfig(
        {
            "num.partitons": "3",
            "num.io.threads": "8",
            "retention.ms": "5",
            "ssl.key.password": "hunter2",
            "num.partitions": "4",
        }
    )
    with caplog.at_level(logging.INFO, logger="kafkalite.broker.config"):
        log_startup_config(cfg, "9.9.9")
    text = caplog.text
    assert "did you mean num.partitions?" in text
    assert "num.io.threads is a Kafka setting ignored by kafkalite" in text
    assert "retention.ms is a topic setting" in text and "log.retention.ms" in text
    assert "kafkalite 9.9.9 starting" in text and "num.partitions=4" in text
    assert "hunter2" not in text and "ssl.key.password=[hidden]" in text
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warned if "num.io.threads" in r.getMessage()] == []


def test_help_config_text_and_docs_are_generated_from_the_table() -> None:
    text = render_text()
    line = next(x for x in text.splitlines() if x.startswith("log.retention.ms "))
    assert "long" in line and "dynamic" in line and ">= -1" in line
    assert "num.io.threads: " in text
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == render_markdown(), (
        "docs/configuration.md is out of date: run python -m kafkalite.broker.config.config_docs"
    )


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        [sys.executable, "-m", "kafkalite.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def test_version_and_help_config() -> None:
    from kafkalite import __version__

    v = _cli("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"kafkalite {__version__}"
    h = _cli("serve", "--help-config")
    assert h.returncode == 0
    assert any(x.startswith("log.retention.hours ") for x in h.stdout.splitlines())
    assert "--help-config" in _cli("serve", "--help").stdout


def _refused(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("kafkalite: ") and needle in last, proc.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ("--override", "log.retention.hours=-5"),
            "configuration: log.retention.hours=-5: Value must be at least -1",
        ),
        (
            ("--override", "advertised.listeners=PLAINTEXT://0.0.0.0:9092"),
            "0.0.0.0 is not an address clients can connect to",
        ),
        (("--override", "listeners=SSL://127.0.0.1:0"), "no key store"),
        (("--log-level", "LOUD"), "--log-level LOUD"),
        (
            ("--override", "num.partitions=abc"),
            "num.partitions=abc: Not a number of type INT (expected a whole number >= 1)",
        ),
    ],
    ids=["retention", "advertised-any", "ssl-no-keystore", "log-level", "not-a-number"],
)
def test_cli_refuses_with_one_line_and_status_2(
    tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    _refused(_cli("serve", "--data-dir", str(tmp_path / "d"), *args), needle)


def test_cli_data_dir_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("")
    _refused(_cli("serve", "--data-dir", str(f)), "not a directory")


def test_port_in_use_and_locked_data_dir(tmp_path: Path) -> None:
    from kafkalite.testing import Broker

    broker = Broker(data_dir=tmp_path / "one").start()
    try:
        port = broker.server.port
        busy = _cli("serve", "--data-dir", str(tmp_path / "two"), "--listen", f"127.0.0.1:{port}")
        _refused(busy, f"cannot listen on 127.0.0.1:{port}: address in use")
        assert "--listen" in busy.stderr
        locked = _cli("serve", "--data-dir", str(tmp_path / "one"), "--listen", "127.0.0.1:0")
        _refused(locked, f"is locked by process {os.getpid()}")
    finally:
        broker.stop()


def test_clean_shutdown_marker_and_recovery_summary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "logs"
    lm = LogManager([d])
    lm.startup()
    lm.get_or_create_log("t", 0)
    lm.shutdown()
    assert (d / CLEAN_SHUTDOWN_FILE).exists()
    lm = LogManager([d])
    with caplog.at_level(logging.INFO, logger="kafkalite.storage.manager"):
        lm.startup()
    assert lm.last_shutdown_clean and not (d / CLEAN_SHUTDOWN_FILE).exists()
    assert "last shutdown was clean" in caplog.text and "recovery scanned 0 segments" in caplog.text
    assert "(1 from the clean-shutdown manifest)" in caplog.text
    lm.shutdown()
    (d / CLEAN_SHUTDOWN_FILE).unlink()  # as after kill -9
    lm = LogManager([d])
    lm.startup()
    assert not lm.last_shutdown_clean
    lm.shutdown()


def test_record_too_large_names_the_properties_to_raise() -> None:
    import time

    from kafkalite.cluster import log_validator
    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.records.batch import build_batch
    from kafkalite.storage.config import LogConfig

    cfg = LogConfig.from_properties({"max.message.bytes": "2000"})
    with pytest.raises(log_validator.RecordValidationError) as info:
        log_validator.validate_records(
            build_batch([(None, b"x" * 5000)]), cfg, int(time.time() * 1000), "t-0"
        )
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert "max.message.bytes" in info.value.message and "message.max.bytes" in info.value.message


def test_help_config_on_a_terminal_is_a_rich_table() -> None:
    import io

    from kafkalite.broker.config.config_docs import print_table

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    print_table(out)
    assert "┃" in out.getvalue() and "retention" in out.getvalue()
