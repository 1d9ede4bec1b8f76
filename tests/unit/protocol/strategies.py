"""Hypothesis strategies that build valid instances of any declared message at any version.

Walks a class's `_schema` (fields, nested struct classes, per-version codec) so it covers every API as it lands.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import kafkalite.protocol.messages  # noqa: F401  (registers every API family that exists)
from kafkalite.protocol.schema import APIS, Message, Struct, Versions, all_versions

# One profile for all protocol property tests: a handful of examples per (message, version) keeps the
# whole directory fast; KAFKALITE_PROTOCOL_EXAMPLES raises it for a deeper (nightly) run.
PROFILE = "kafkalite-protocol"
settings.register_profile(
    PROFILE,
    max_examples=int(os.environ.get("KAFKALITE_PROTOCOL_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
PROTOCOL_SETTINGS = settings.get_profile(PROFILE)

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

MAX_STRING_CHARS = (
    12  # far below the int16 length limit of non-compact strings (checked in test_primitives)
)
MAX_BYTES = 24
MAX_ARRAY = 3
MAX_NESTED_ARRAY = 2  # arrays inside array elements stay smaller so messages do not explode


def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    # bias toward the interesting values (defaults, -1 sentinels, extremes) as well as the whole range
    specials = sorted({v for v in (lo, hi, 0, -1, 1) if lo <= v <= hi})
    return st.one_of(st.sampled_from(specials), st.integers(lo, hi))


_UUIDS = st.one_of(
    st.just(uuid.UUID(int=0)),
    st.uuids(allow_nil=True),
    st.integers(0, 2**128 - 1).map(lambda i: uuid.UUID(int=i)),
)
_STRINGS = st.text(max_size=MAX_STRING_CHARS)
_BYTES = st.binary(max_size=MAX_BYTES)
_FLOATS = st.floats(allow_nan=False)  # NaN != NaN would break equality, not the codec


def primitive_strategy(type_name: str) -> st.SearchStrategy[Any]:
    """Values of one primitive field type (never None; nullability is the caller's business)."""
    if type_name in INT_RANGES:
        return _ints(*INT_RANGES[type_name])
    if type_name == "bool":
        return st.booleans()
    if type_name == "float64":
        return _FLOATS
    if type_name == "uuid":
        return _UUIDS
    if type_name == "string":
        return _STRINGS
    if type_name in ("bytes", "records"):
        return _BYTES
    raise ValueError(f"unknown primitive type {type_name!r}")


def present_fields(cls: type[Struct], version: int) -> list[str]:
    """Names of the fields of `cls` that are on the wire at `version` (regular and tagged)."""
    codec = cls._schema.codec(version)
    names = [name for name, _, _ in codec.regular]
    names += [entry[0] for entry in codec.tagged.values()]
    return names


_CACHE: dict[tuple[type[Struct], int, int], st.SearchStrategy[Any]] = {}


def struct_strategy(cls: type[Struct], version: int, depth: int = 0) -> st.SearchStrategy[Any]:
    """Instances of a (message or nested) struct class valid at `version`; absent fields keep defaults."""
    key = (cls, version, depth)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    schema = cls._schema
    present = set(present_fields(cls, version))
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for fdecl in schema.fields:
        if fdecl.name not in present:
            continue
        nullable = version in Versions.parse(fdecl.nullable)
        is_array = fdecl.type.startswith("[]")
        elem = fdecl.type[2:] if is_array else fdecl.type
        child = schema.children.get(fdecl.name)
        if child is not None:
            elem_st: st.SearchStrategy[Any] = struct_strategy(child, version, depth + 1)
        else:
            elem_st = primitive_strategy(elem)
        if is_array:
            size = MAX_ARRAY if depth == 0 else MAX_NESTED_ARRAY
            value_st: st.SearchStrategy[Any] = st.lists(elem_st, max_size=size)
        else:
            value_st = elem_st
        if nullable:
            value_st = st.none() | value_st
        parts[fdecl.name] = value_st
    strategy = st.fixed_dictionaries(parts).map(lambda kw: cls(**kw))
    _CACHE[key] = strategy
    return strategy


def message_strategy(cls: type[Message], version: int) -> st.SearchStrategy[Any]:
    """Instances of a request or response class valid at `version`."""
    if version not in cls.VALID_VERSIONS:
        raise ValueError(f"{cls.__name__} has no version {version}")
    return struct_strategy(cls, version)


def message_cases() -> Iterator[tuple[str, type[Message], int]]:
    """(test id, class, version) for every registered API, request and response, every valid version."""
    for key in sorted(APIS):
        api = APIS[key]
        for cls in (api.request, api.response):
            for version in all_versions(cls):
                yield f"{cls.__name__}-v{version}", cls, version
