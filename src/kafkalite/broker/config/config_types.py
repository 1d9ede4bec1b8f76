"""The vocabulary of config tables: ConfigDef, the DescribeConfigs type and source ids, Kafka's ranges,
and `coerce`, a value read as its type (errors in Kafka's words, saying what was expected).

The tables themselves are in broker.config_defs (broker settings) and broker.group_config_defs (groups).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

LONG_MAX = 2**63 - 1

# DescribeConfigs config types (v3+)
T_BOOLEAN, T_STRING, T_INT, T_SHORT, T_LONG, T_DOUBLE, T_LIST = 1, 2, 3, 4, 5, 6, 7
_PY = {
    T_BOOLEAN: "bool",
    T_STRING: "str",
    T_INT: "int",
    T_SHORT: "int",
    T_LONG: "int",
    T_DOUBLE: "float",
    T_LIST: "list",
}

# DescribeConfigs config sources (Kafka's ConfigSource ids)
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_BROKER_LOGGER = 6  # DYNAMIC_BROKER_LOGGER_CONFIG: a logger's level
SOURCE_GROUP = 8  # DYNAMIC_GROUP_CONFIG: a group's own override


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: int
    default: str | None
    doc: str
    read_only: bool = True
    at_least: int | None = None  # Kafka's Range validator bounds of a numeric setting
    at_most: int | None = None
    valid: tuple[str, ...] | None = None  # the values a string setting may take (any case)

    def allowed(self) -> str:
        """What the setting accepts, in words (empty when anything of its type goes)."""
        if self.valid is not None:
            if len(self.valid) == 1:
                return self.valid[0]
            return ", ".join(self.valid[:-1]) + " or " + self.valid[-1]
        if self.at_least is not None and self.at_most is not None:
            return f"{self.at_least}..{self.at_most}"
        if self.at_least is not None:
            return f">= {self.at_least}"
        if self.at_most is not None:
            return f"<= {self.at_most}"
        return ""


def define(
    name: str,
    type_: int,
    default: str | None,
    doc: str,
    read_only: bool = True,
    *,
    at_least: int | None = None,
    at_most: int | None = None,
    valid: tuple[str, ...] | None = None,
) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, read_only, at_least, at_most, valid)


# a property's value once coerced to its definition's type
ConfigValue = bool | int | float | str | list[str]


_INTEGER = re.compile(r"[+-]?[0-9]+")
# Kafka's integer types and their bounds: a value outside is "Not a number of type INT", as there
_INTEGER_TYPES: dict[int, tuple[str, int, int]] = {
    T_SHORT: ("SHORT", -(2**15), 2**15 - 1),
    T_INT: ("INT", -(2**31), 2**31 - 1),
    T_LONG: ("LONG", -(2**63), 2**63 - 1),
}


def _within(allowed: str) -> str:
    """ConfigDef.allowed()'s words after "a number": ">= 1" as is, "0..1" as "in 0..1"."""
    return allowed if not allowed or allowed.startswith(("<", ">")) else f"in {allowed}"


def coerce(type_: int, value: str, allowed: str = "") -> ConfigValue:
    """`value` as the setting's type, trimmed as Kafka's ConfigDef parses it; ValueError, in Kafka's
    words with what was expected (`allowed`: the setting's own range, as ConfigDef.allowed()), for
    a value that is not of the type."""
    kind = _PY.get(type_, "str")
    if kind == "bool":
        v = value.strip().lower()
        if v not in ("true", "false"):
            raise ValueError("Expected value to be either true or false")
        return v == "true"
    if kind == "int":
        name, lo, hi = _INTEGER_TYPES.get(type_, _INTEGER_TYPES[T_INT])
        v = value.strip()
        if not _INTEGER.fullmatch(v):
            within = _within(allowed) or f"in {lo}..{hi}"
            raise ValueError(f"Not a number of type {name} (expected a whole number {within})")
        if not lo <= int(v) <= hi:
            raise ValueError(f"Not a number of type {name} (expected a whole number in {lo}..{hi})")
        return int(v)
    if kind == "float":
        try:
            number = float(value.strip())
        except ValueError:
            number = math.nan
        if math.isnan(number) or not value.strip():
            within = f" {_within(allowed)}" if allowed else ""
            raise ValueError(f"Not a number of type DOUBLE (expected a number{within})")
        return number
    if kind == "list":
        return [x.strip() for x in value.split(",") if x.strip()]
    return value
