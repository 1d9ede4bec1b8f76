"""Serializers and deserializers: bytes pass through, str as UTF-8, or any callable / object with
`serialize(topic, value)` / `deserialize(topic, data)`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def _to_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(
        f"cannot send a {type(value).__name__} without a serializer (key.serializer / value.serializer)"
    )


def make_serializer(spec: Any) -> Callable[[str, Any], bytes | None]:
    if spec is None or spec == "bytes":
        return lambda topic, v: _to_bytes(v)
    if spec in ("str", "string", "utf-8"):
        return lambda topic, v: None if v is None else str(v).encode("utf-8")
    if spec == "json":
        return lambda topic, v: None if v is None else json.dumps(v).encode("utf-8")
    if hasattr(spec, "serialize"):
        return spec.serialize  # type: ignore[no-any-return]
    if callable(spec):
        try:
            import inspect

            if len(inspect.signature(spec).parameters) == 1:
                return lambda topic, v: spec(v)
        except (TypeError, ValueError):
            pass
        return spec  # type: ignore[no-any-return]
    raise ValueError(f"unknown serializer {spec!r}")


def make_deserializer(spec: Any) -> Callable[[str, bytes | None], Any] | None:
    """None means identity (bytes); the consumer skips the call entirely on its hot path."""
    if spec is None or spec == "bytes":
        return None
    if spec in ("str", "string", "utf-8"):
        return lambda topic, v: None if v is None else v.decode("utf-8")
    if spec == "json":
        return lambda topic, v: None if v is None else json.loads(v)
    if hasattr(spec, "deserialize"):
        return spec.deserialize  # type: ignore[no-any-return]
    if callable(spec):
        try:
            import inspect

            if len(inspect.signature(spec).parameters) == 1:
                return lambda topic, v: spec(v)
        except (TypeError, ValueError):
            pass
        return spec  # type: ignore[no-any-return]
    raise ValueError(f"unknown deserializer {spec!r}")
