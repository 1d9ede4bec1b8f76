"""Client configuration: Kafka's property names (`linger.ms` or `linger_ms`), defaults per client type.

`make_config(defaults, config, kwargs)` returns a dict keyed by dotted names with typed values;
Java / librdkafka aliases are mapped by client/kafka_names.py, names with no effect warned once.
"""

from __future__ import annotations

import logging
from typing import Any

from kafkalite.client.kafka_names import translate

log = logging.getLogger("kafkalite.client")

COMMON: dict[str, Any] = {
    "bootstrap.servers": "127.0.0.1:9092",
    "client.id": "kafkalite",
    "request.timeout.ms": 30000,
    "connections.max.idle.ms": 540000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
    "metadata.max.age.ms": 300000,
    "max.in.flight.requests.per.connection": 5,
    "socket.connection.setup.timeout.ms": 10000,
    # -1: the operating system's socket buffer sizes (Kafka's defaults are 64 KiB / 128 KiB)
    "receive.buffer.bytes": -1,
    "send.buffer.bytes": -1,
    # security (client/security.py reads these): Kafka's Java names and librdkafka's
    "security.protocol": "PLAINTEXT",
    "sasl.mechanism": "GSSAPI",  # Kafka's default, refused here: name PLAIN or SCRAM-SHA-*
    "sasl.username": None,
    "sasl.password": None,
    "sasl.jaas.config": None,
    "ssl.ca.location": None,
    "ssl.ca.pem": None,
    "ssl.truststore.type": None,
    "ssl.certificate.location": None,
    "ssl.key.location": None,
    "ssl.key.password": None,
    "ssl.keystore.location": None,
    "ssl.keystore.type": None,
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "enable.ssl.certificate.verification": True,
    "ssl.context": None,  # an ssl.SSLContext used as it is (kafka-python's ssl_context)
    "client.rack": "",
    "api.version.request": True,
}

PRODUCER: dict[str, Any] = {
    **COMMON,
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 16384,
    "buffer.memory": 32 * 1024 * 1024,
    "max.block.ms": 60000,
    "max.request.size": 1048576,
    "compression.type": "none",
    "compression.level": None,
    "retries": 2147483647,
    "delivery.timeout.ms": 120000,
    "enable.idempotence": False,
    "transactional.id": None,
    "transaction.timeout.ms": 60000,
    "partitioner": "default",
    "partitioner.ignore.keys": False,
    "key.serializer": None,
    "value.serializer": None,
}

CONSUMER: dict[str, Any] = {
    **COMMON,
    "group.id": None,
    "group.instance.id": None,
    "group.protocol": "classic",
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "max.poll.interval.ms": 300000,
    "max.poll.records": 500,
    "fetch.min.bytes": 1,
    "fetch.max.bytes": 52428800,
    "fetch.max.wait.ms": 500,
    "max.partition.fetch.bytes": 1048576,
    "auto.offset.reset": "latest",
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "isolation.level": "read_uncommitted",
    "partition.assignment.strategy": ["range", "cooperative-sticky"],
    "check.crcs": False,
    "exclude.internal.topics": True,
    "allow.auto.create.topics": True,
    "key.deserializer": None,
    "value.deserializer": None,
    "metadata.max.age.ms": 300000,
    "default.api.timeout.ms": 60000,
    "rebalance.listener": None,
    # kafkalite's fetch filter (issue 35): the broker sends only matching records, or the client
    # filters locally when the broker's answer does not say it did
    "filter": None,
}

# Kafka's AdminClient never creates topics by asking about them (its Metadata requests say so)
ADMIN: dict[str, Any] = {
    **COMMON,
    "default.api.timeout.ms": 60000,
    "allow.auto.create.topics": False,
}

_INT_SUFFIXES = (".ms", ".bytes", ".size", ".records", ".memory", ".connection", "retries")


def normalize_key(key: str) -> str:
    return key.replace("_", ".")


def _coerce(key: str, default: Any, value: Any) -> Any:
    if isinstance(value, str):
        if isinstance(default, bool):
            return value.strip().lower() in ("1", "true", "yes", "on")
        if isinstance(default, int) or (default is None and key.endswith(_INT_SUFFIXES)):
            try:
                return int(value)
            except ValueError:
                return value
    return value


def make_config(
    defaults: dict[str, Any], config: dict[str, Any] | None, kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Merge `config` then `kwargs` over `defaults`, Kafka's Java / librdkafka names mapped onto the
    client's own; one warning names every setting that has no effect here."""
    out = dict(defaults)
    unused: list[str] = []
    for source in (config or {}, kwargs):
        for k, v in source.items():
            key = normalize_key(k)
            mapped = translate(key, v, defaults)
            if mapped is None:
                if k not in unused:
                    unused.append(k)
                if key not in defaults:  # kept for whoever asks; a default is not overridden
                    out[key] = v
                continue
            key, v = mapped
            out[key] = _coerce(key, defaults.get(key), v)
    if unused:
        log.warning(
            "client configuration with no effect in kafkalite's client (ignored): %s",
            ", ".join(repr(k) for k in unused),
        )
    servers = out["bootstrap.servers"]
    if isinstance(servers, (list, tuple)):
        out["bootstrap.servers"] = ",".join(servers)
    return out


def honoured(defaults: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The entries of `config` a client with these defaults honours (Kafka / librdkafka aliases
    included, as given): to pass one client's settings to another type without its warning."""
    return {k: v for k, v in config.items() if translate(normalize_key(k), v, defaults) is not None}


def parse_servers(servers: str) -> list[tuple[str, int]]:
    """'host:port,host2:port' (optionally with a PLAINTEXT:// prefix) -> [(host, port), ...]."""
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} must look like host:port")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not out:
        raise ValueError("bootstrap.servers is empty")
    return out
