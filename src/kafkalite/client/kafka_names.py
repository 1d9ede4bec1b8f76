"""Kafka's Java and librdkafka client property names, mapped in ONE table onto the names kafkalite's
client reads, and the names that mean nothing here (collected, so a client warns once naming them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _kbytes(value: Any) -> int:
    return int(value) * 1024


def _check_hostname(value: Any) -> str:
    return "https" if _truthy(value) else ""


# alias (as written by a Java / librdkafka / kafka-python application, dots for underscores) ->
# (the client's own name, a conversion of the value or None). Names that are the same in Kafka's
# Java client and here (linger.ms, fetch.max.bytes, isolation.level, ...) need no row: they are
# read as they are (client/config.py's defaults list them).
ALIASES: dict[str, tuple[str, Callable[[Any], Any] | None]] = {
    # librdkafka
    "metadata.broker.list": ("bootstrap.servers", None),
    "queue.buffering.max.ms": ("linger.ms", None),
    "queue.buffering.max.kbytes": ("buffer.memory", _kbytes),
    "message.max.bytes": ("max.request.size", None),
    "message.send.max.retries": ("retries", None),
    "message.timeout.ms": ("delivery.timeout.ms", None),
    "compression.codec": ("compression.type", None),
    "request.required.acks": ("acks", None),
    "max.in.flight": ("max.in.flight.requests.per.connection", None),
    "fetch.wait.max.ms": ("fetch.max.wait.ms", None),
    "fetch.message.max.bytes": ("max.partition.fetch.bytes", None),
    "topic.metadata.refresh.interval.ms": ("metadata.max.age.ms", None),
    "socket.timeout.ms": ("request.timeout.ms", None),
    "socket.receive.buffer.bytes": ("receive.buffer.bytes", None),
    "socket.send.buffer.bytes": ("send.buffer.bytes", None),
    "sasl.mechanisms": ("sasl.mechanism", None),
    # Java: the PEM truststore / keystore (ssl.*.type=PEM); JKS and PKCS12 are refused at connect
    "ssl.truststore.location": ("ssl.ca.location", None),
    "ssl.truststore.certificates": ("ssl.ca.pem", None),
    # kafka-python's argument names (sasl_plain_username -> sasl.plain.username, ...)
    "sasl.plain.username": ("sasl.username", None),
    "sasl.plain.password": ("sasl.password", None),
    "ssl.cafile": ("ssl.ca.location", None),
    "ssl.certfile": ("ssl.certificate.location", None),
    "ssl.keyfile": ("ssl.key.location", None),
    "ssl.password": ("ssl.key.password", None),
    "ssl.check.hostname": ("ssl.endpoint.identification.algorithm", _check_hostname),
}

# Java serializer classes that mean what a kafkalite (de)serializer name means; any other Java
# class name (Avro, Long, ...) has no meaning in a Python client and is dropped with the warning.
_JAVA_SERDES = {
    "StringSerializer": "str",
    "StringDeserializer": "str",
    "ByteArraySerializer": "bytes",
    "ByteArrayDeserializer": "bytes",
    "BytesSerializer": "bytes",
    "BytesDeserializer": "bytes",
    "ByteBufferSerializer": "bytes",
    "ByteBufferDeserializer": "bytes",
}
SERDE_NAMES = frozenset(
    {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}
)

# Names the client's defaults carry (so other code may read them) that change nothing yet: setting
# one joins the one warning instead of passing in silence.
NO_EFFECT = frozenset(
    {
        "api.version.request",
        "connections.max.idle.ms",
        "exclude.internal.topics",
        "group.protocol",
        "retry.backoff.max.ms",
    }
)


def _java_class(value: Any) -> str | None:
    """The simple name of a Java class name (`org.apache...StringSerializer`), else None."""
    if not isinstance(value, str) or "." not in value or " " in value.strip():
        return None
    simple = value.strip().rsplit(".", 1)[1]
    return simple if simple[:1].isupper() else None


def translate(key: str, value: Any, known: dict[str, Any]) -> tuple[str, Any] | None:
    """(the client's name, the value) for one dotted setting, or None when it means nothing here.

    `known` is the client type's defaults: a name in it (after the alias table) is honoured.
    """
    if key in ALIASES:
        target, convert = ALIASES[key]
        key, value = target, (value if convert is None or value is None else convert(value))
    if key in SERDE_NAMES:
        simple = _java_class(value)
        if simple is not None:
            mapped = _JAVA_SERDES.get(simple)
            return None if mapped is None else (key, mapped)
    if key not in known or key in NO_EFFECT:
        return None
    return key, value
