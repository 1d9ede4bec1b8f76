"""Group settings under Kafka's names: the group coordinator's broker configs and the per-group configs.

Per-group defaults come from the broker's; the checks are Kafka's, pure; broker.group_configs stores and serves them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kafkalite.broker.config.config_types import T_INT, T_STRING, ConfigDef, define
from kafkalite.cluster.metadata import INTERNAL_TOPICS, topic_name_error

SHARE_GROUP_STATE_TOPIC = "__share_group_state"


def _ms(
    name: str, default: int, doc: str, at_least: int = 1, at_most: int | None = None
) -> ConfigDef:
    return define(name, T_INT, str(default), doc, at_least=at_least, at_most=at_most)


# KIP-848 consumer groups and KIP-932 share groups (Kafka's GroupCoordinatorConfig,
# ShareGroupConfig and ShareCoordinatorConfig: names, defaults and ranges); a group's own
# overrides of some of them are group configs (GROUP_CONFIG_DEFS below)
GROUP_COORDINATOR_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    _ms(
        "group.consumer.session.timeout.ms",
        45000,
        "KIP-848 consumer groups: a member not heard from this long leaves the group.",
    ),
    _ms(
        "group.consumer.min.session.timeout.ms",
        45000,
        "Smallest consumer.session.timeout.ms a consumer group may be given.",
    ),
    _ms(
        "group.consumer.max.session.timeout.ms",
        60000,
        "Largest consumer.session.timeout.ms a consumer group may be given.",
    ),
    _ms(
        "group.consumer.heartbeat.interval.ms",
        5000,
        "KIP-848 consumer groups: how often members are told to heartbeat.",
    ),
    _ms(
        "group.consumer.min.heartbeat.interval.ms",
        5000,
        "Smallest consumer.heartbeat.interval.ms a consumer group may be given.",
    ),
    _ms(
        "group.consumer.max.heartbeat.interval.ms",
        15000,
        "Largest consumer.heartbeat.interval.ms a consumer group may be given.",
    ),
    _ms(
        "group.share.delivery.count.limit",
        5,
        "Share groups: delivery attempts of a record before it is archived.",
        2,
        10,
    ),
    _ms(
        "group.share.record.lock.duration.ms",
        30000,
        "Share groups: how long a delivered record stays acquired by its consumer.",
        1000,
        3600000,
    ),
    _ms(
        "group.share.min.record.lock.duration.ms",
        15000,
        "Smallest share.record.lock.duration.ms a share group may be given.",
        1000,
        30000,
    ),
    _ms(
        "group.share.max.record.lock.duration.ms",
        60000,
        "Largest share.record.lock.duration.ms a share group may be given.",
        30000,
        3600000,
    ),
    _ms(
        "group.share.session.timeout.ms",
        45000,
        "Share groups: a member not heard from this long leaves the group.",
    ),
    _ms(
        "group.share.min.session.timeout.ms",
        45000,
        "Smallest share.session.timeout.ms a share group may be given.",
    ),
    _ms(
        "group.share.max.session.timeout.ms",
        60000,
        "Largest share.session.timeout.ms a share group may be given.",
    ),
    _ms(
        "group.share.heartbeat.interval.ms",
        5000,
        "Share groups: how often members are told to heartbeat.",
    ),
    _ms(
        "group.share.min.heartbeat.interval.ms",
        5000,
        "Smallest share.heartbeat.interval.ms a share group may be given.",
    ),
    _ms(
        "group.share.max.heartbeat.interval.ms",
        15000,
        "Largest share.heartbeat.interval.ms a share group may be given.",
    ),
    _ms(
        "group.share.partition.max.record.locks",
        2000,
        "Share groups: records of one share-partition that may be acquired at once.",
        100,
        10000,
    ),
    _ms(
        "group.share.max.size",
        200,
        "Share groups: the most members one share group may have.",
        10,
        1000,
    ),
)


_BROKER_DEFS: dict[str, ConfigDef] = {d.name: d for d in GROUP_COORDINATOR_CONFIG_DEFS}

# -- per-group configs ------------------------------------------------------------------------------

AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
BY_DURATION = "by_duration:"


@dataclass(frozen=True)
class GroupConfigDef:
    """One group config: its type, where its default comes from (a broker setting, else `default`),
    Kafka's range, and the broker settings that bound a group's value (min, max)."""

    name: str
    type: int
    doc: str
    broker_default: str | None = None
    default: str = ""
    at_least: int | None = None
    at_most: int | None = None
    bounds: tuple[str, str] | None = None


GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(
            "consumer.session.timeout.ms",
            T_INT,
            "This consumer group's session timeout (KIP-848 protocol).",
            "group.consumer.session.timeout.ms",
            at_least=1,
            bounds=(
                "group.consumer.min.session.timeout.ms",
                "group.consumer.max.session.timeout.ms",
            ),
        ),
        GroupConfigDef(
            "consumer.heartbeat.interval.ms",
            T_INT,
            "How often this consumer group's members heartbeat (KIP-848 protocol).",
            "group.consumer.heartbeat.interval.ms",
            at_least=1,
            bounds=(
                "group.consumer.min.heartbeat.interval.ms",
                "group.consumer.max.heartbeat.interval.ms",
            ),
        ),
        GroupConfigDef(
            "share.session.timeout.ms",
            T_INT,
            "This share group's session timeout.",
            "group.share.session.timeout.ms",
            at_least=1,
            bounds=("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
        ),
        GroupConfigDef(
            "share.heartbeat.interval.ms",
            T_INT,
            "How often this share group's members heartbeat.",
            "group.share.heartbeat.interval.ms",
            at_least=1,
            bounds=(
                "group.share.min.heartbeat.interval.ms",
                "group.share.max.heartbeat.interval.ms",
            ),
        ),
        GroupConfigDef(
            "share.record.lock.duration.ms",
            T_INT,
            "How long a record delivered to this share group stays acquired by its consumer.",
            "group.share.record.lock.duration.ms",
            at_least=1000,
            bounds=(
                "group.share.min.record.lock.duration.ms",
                "group.share.max.record.lock.duration.ms",
            ),
        ),
        GroupConfigDef(
            "share.delivery.count.limit",
            T_INT,
            "Delivery attempts of a record to this share group before it is archived "
            "(kafkalite's own; Kafka has only the broker setting).",
            "group.share.delivery.count.limit",
            at_least=2,
            at_most=10,
        ),
        GroupConfigDef(
            AUTO_OFFSET_RESET,
            T_STRING,
            "Where this share group starts on a partition it has no state for: latest, earliest "
            "or by_duration:<ISO-8601 duration> (the first record at most that long ago).",
            default="latest",
        ),
        GroupConfigDef(
            ISOLATION_LEVEL,
            T_STRING,
            "read_committed: this share group sees only committed transactional records.",
            default="read_uncommitted",
        ),
        GroupConfigDef(
            DLQ_TOPIC,
            T_STRING,
            "Topic this share group's undeliverable records are copied to (empty: none).",
            default="",
        ),
    )
}


def broker_group_setting(broker_props: Mapping[str, str], name: str) -> str:
    """A group coordinator broker setting: server.properties, else Kafka's default."""
    if name in broker_props:
        return broker_props[name].strip()
    default = _BROKER_DEFS[name].default
    assert default is not None
    return default


def group_config_defaults(broker_props: Mapping[str, str]) -> dict[str, str]:
    """What a group without overrides gets: each group config's broker setting or default."""
    return {
        d.name: broker_group_setting(broker_props, d.broker_default)
        if d.broker_default is not None
        else d.default
        for d in GROUP_CONFIG_DEFS.values()
    }


def _int(name: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(
            f"Invalid value {value} for configuration {name}: Not a number of type INT"
        ) from None


# java.time.Duration.parse's form: PnDTnHnMn.nS, each part optional (at least one), signs allowed
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_iso_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration as Java's Duration.parse reads it (days, hours,
    minutes, seconds: P1D, PT12H, P1DT2H30M, PT0.5S); ValueError otherwise."""
    m = _DURATION.fullmatch(text)
    if m is None or (m.group(3) is not None and m.group(3).upper() == "T"):
        raise ValueError(f"{text!r} is not an ISO-8601 duration such as PT1H or P1DT12H")
    sign, days, _, hours, minutes, seconds, fraction = m.groups()
    if days is None and hours is None and minutes is None and seconds is None:
        raise ValueError(f"{text!r} is not an ISO-8601 duration such as PT1H or P1DT12H")
    ms = (
        int(days or 0) * 86_400_000
        + int(hours or 0) * 3_600_000
        + int(minutes or 0) * 60_000
        + int(seconds or 0) * 1000
    )
    if fraction:
        frac_ms = int((fraction + "000")[:3])
        ms += -frac_ms if (seconds or "").startswith("-") else frac_ms
    return -ms if sign == "-" else ms


def auto_offset_reset_error(value: str) -> str | None:
    """Why a share.auto.offset.reset value is refused, or None."""
    v = value.strip()
    if v.lower() in ("latest", "earliest"):
        return None
    if v.lower().startswith(BY_DURATION):
        try:
            ms = parse_iso_duration_ms(v[len(BY_DURATION) :])
        except ValueError as exc:
            return f"Invalid value {value} for configuration {AUTO_OFFSET_RESET}: {exc}"
        if ms < 0:
            return (
                f"Invalid value {value} for configuration {AUTO_OFFSET_RESET}: "
                "the duration must not be negative"
            )
        return None
    return (
        f"Invalid value {value} for configuration {AUTO_OFFSET_RESET}: "
        "expected latest, earliest or by_duration:<ISO-8601 duration> (e.g. by_duration:PT1H)"
    )


def dlq_topic_error(value: str) -> str | None:
    """Why errors.deadletterqueue.topic.name is refused, or None (empty means no dead-letter topic)."""
    if value == "":
        return None
    if value in INTERNAL_TOPICS or value == SHARE_GROUP_STATE_TOPIC:
        return (
            f"Invalid value {value} for configuration {DLQ_TOPIC}: "
            "an internal topic cannot be a dead-letter topic"
        )
    why = topic_name_error(value)
    if why is not None:
        return f"Invalid value {value} for configuration {DLQ_TOPIC}: {why}"
    return None


def group_configs_error(
    overrides: Mapping[str, str], broker_props: Mapping[str, str]
) -> str | None:
    """Why these overrides cannot be a group's configs (Kafka's GroupConfig.validate, plus
    kafkalite's own configs), or None. `broker_props` gives the defaults and the min/max bounds."""
    unknown = sorted(k for k in overrides if k not in GROUP_CONFIG_DEFS)
    if unknown:
        return (
            f"Unknown group config name: {unknown[0]} "
            f"(group configs: {', '.join(sorted(GROUP_CONFIG_DEFS))})"
        )
    merged = group_config_defaults(broker_props)
    merged.update(overrides)
    ints: dict[str, int] = {}
    try:
        for name, d in GROUP_CONFIG_DEFS.items():
            if d.type != T_INT:
                continue
            value = ints[name] = _int(name, merged[name])
            if d.at_least is not None and value < d.at_least:
                return f"Invalid value {value} for configuration {name}: Value must be at least {d.at_least}"
            if d.at_most is not None and value > d.at_most:
                return f"Invalid value {value} for configuration {name}: Value must be no more than {d.at_most}"
            if d.bounds is not None:
                low_name, high_name = d.bounds
                low = _int(low_name, broker_group_setting(broker_props, low_name))
                high = _int(high_name, broker_group_setting(broker_props, high_name))
                if value < low:
                    return f"{name} must be greater than or equal to {low_name} ({value} < {low})"
                if value > high:
                    return f"{name} must be less than or equal to {high_name} ({value} > {high})"
    except ValueError as exc:
        return str(exc)
    for session, heartbeat in (
        ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
        ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ):
        if ints[session] <= ints[heartbeat]:
            return (
                f"{session} must be greater than {heartbeat} ({ints[session]} <= {ints[heartbeat]})"
            )
    why = auto_offset_reset_error(merged[AUTO_OFFSET_RESET])
    if why is not None:
        return why
    if merged[ISOLATION_LEVEL] not in ISOLATION_LEVELS:
        return (
            f"Invalid value {merged[ISOLATION_LEVEL]} for configuration {ISOLATION_LEVEL}: "
            f"String must be one of: {', '.join(ISOLATION_LEVELS)}"
        )
    return dlq_topic_error(merged[DLQ_TOPIC])


# -- the broker settings' own constraints (Kafka's GroupCoordinatorConfig and ShareGroupConfig) -----

_BROKER_ORDER: tuple[tuple[str, str, str], ...] = (
    # (smaller, larger, relation): smaller <= larger, or smaller < larger for "<"
    ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms", "<="),
    ("group.consumer.min.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms", "<="),
    ("group.consumer.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms", "<="),
    ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms", "<="),
    ("group.consumer.min.session.timeout.ms", "group.consumer.session.timeout.ms", "<="),
    ("group.consumer.session.timeout.ms", "group.consumer.max.session.timeout.ms", "<="),
    ("group.consumer.heartbeat.interval.ms", "group.consumer.session.timeout.ms", "<"),
    ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms", "<="),
    ("group.share.min.heartbeat.interval.ms", "group.share.heartbeat.interval.ms", "<="),
    ("group.share.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms", "<="),
    ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms", "<="),
    ("group.share.min.session.timeout.ms", "group.share.session.timeout.ms", "<="),
    ("group.share.session.timeout.ms", "group.share.max.session.timeout.ms", "<="),
    ("group.share.heartbeat.interval.ms", "group.share.session.timeout.ms", "<"),
    ("group.share.min.record.lock.duration.ms", "group.share.record.lock.duration.ms", "<="),
    ("group.share.record.lock.duration.ms", "group.share.max.record.lock.duration.ms", "<="),
)


def broker_group_configs_error(broker_props: Mapping[str, str]) -> str | None:
    """Why the group coordinator's broker settings contradict each other (a default outside its
    min/max, a heartbeat not shorter than the session), or None. Types and ranges are checked first."""
    for small, large, relation in _BROKER_ORDER:
        a = int(broker_group_setting(broker_props, small))
        b = int(broker_group_setting(broker_props, large))
        if a > b or (relation == "<" and a == b):
            wanted = "less than" if relation == "<" else "less than or equal to"
            return f"{small} ({a}) must be {wanted} {large} ({b}); set both in server.properties"
    return None
