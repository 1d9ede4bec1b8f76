"""The vocabulary of config tables: ConfigDef, the DescribeConfigs type and source ids, Kafka's ranges.

The tables themselves are in broker.config_defs (broker settings) and broker.group_config_defs (groups).
"""

from __future__ import annotations

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
