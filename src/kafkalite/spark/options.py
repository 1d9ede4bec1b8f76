"""Option parsing and validation for the `kafkalite` Spark format, with the names and meanings of Spark's
Kafka source and sink (pure code: no Spark, no network).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    parse_offset_spec,
    parse_timestamp_spec,
)

STRATEGIES = ("subscribe", "subscribePattern", "assign")

# Kafka consumer properties Spark's source refuses, with why (same meaning as Spark's messages).
_REJECTED_SOURCE = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported: set the source option 'startingOffsets' "
        "to 'earliest' or 'latest' instead. The query tracks its own offsets in its checkpoint "
        "(startingOffsets applies only when a new query starts; a restarted query resumes where it "
        "stopped)."
    ),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported: keys are always read as bytes; "
        "deserialize them with DataFrame operations (e.g. CAST(key AS STRING))."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported: values are always read as bytes; "
        "deserialize them with DataFrame operations (e.g. CAST(value AS STRING) or from_json)."
    ),
    "enable.auto.commit": (
        "Kafka option 'enable.auto.commit' is not supported: the source never commits offsets to "
        "Kafka; the query's checkpoint is the source of truth for what was consumed."
    ),
    "interceptor.classes": (
        "Kafka option 'interceptor.classes' is not supported: interceptors could change the records "
        "the source reads and break the query."
    ),
}
_REJECTED_SINK = {
    "key.serializer": (
        "Kafka option 'key.serializer' is not supported: keys are written as bytes; serialize the "
        "'key' column to string or binary with DataFrame operations."
    ),
    "value.serializer": (
        "Kafka option 'value.serializer' is not supported: values are written as bytes; serialize "
        "the 'value' column to string or binary with DataFrame operations."
    ),
    "interceptor.classes": _REJECTED_SOURCE["interceptor.classes"],
}

_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")
_UNITS_MS = {
    "": 1,
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def parse_duration_ms(text: str, name: str) -> int:
    """'15m', '30s', '500ms', '2h', '1d' or plain milliseconds -> milliseconds."""
    m = _DURATION.match(str(text).lower())
    if not m or m.group(2) not in _UNITS_MS:
        raise ValueError(
            f"Option '{name}' must be a duration like 500ms, 30s, 15m, 1h; got {text!r}"
        )
    return int(m.group(1)) * _UNITS_MS[m.group(2)]


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    """Spark option names are case-insensitive: index them by their lower-case name."""
    return {str(k).lower(): str(v) for k, v in options.items()}


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    low = raw.strip().lower()
    if low not in ("true", "false"):
        raise ValueError(f"Option '{name}' must be 'true' or 'false', got {raw!r}")
    return low == "true"


def _positive_int(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        val = int(raw)
    except ValueError:
        raise ValueError(f"Option '{name}' must be a positive integer, got {raw!r}") from None
    if val <= 0:
        raise ValueError(f"Option '{name}' must be a positive integer, got {raw!r}")
    return val


def _non_negative_int(opts: dict[str, str], name: str, default: int) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        val = int(raw)
    except ValueError:
        raise ValueError(f"Option '{name}' must be a non-negative integer, got {raw!r}") from None
    if val < 0:
        raise ValueError(f"Option '{name}' must be a non-negative integer, got {raw!r}")
    return val


FIXED_GROUP_ID_WARNING = (
    "Kafka option 'kafka.group.id' is set: every query and source given this group id shares one "
    "consumer group. kafkalite's source only commits its finished micro-batches' offsets to that "
    "group (for lag monitoring), so concurrent queries or a restarted query with the same id "
    "overwrite each other's progress there and the group's lag figures mean little; use one query "
    "per group id, or leave kafka.group.id unset and use 'groupIdPrefix'."
)


def kafka_params(opts: dict[str, str], rejected: Mapping[str, str]) -> dict[str, str]:
    """The `kafka.`-prefixed options with the prefix removed; raises for the ones Spark refuses."""
    out: dict[str, str] = {}
    for key, val in opts.items():
        if not key.startswith("kafka."):
            continue
        prop = key[len("kafka.") :]
        if prop in rejected:
            raise ValueError(rejected[prop])
        out[prop] = val
    if not out.get("bootstrap.servers"):
        raise ValueError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring the Kafka client"
        )
    return out


@dataclass(frozen=True)
class Subscription:
    """Which partitions the source reads: a topic list, a full-match regex, or fixed partitions."""

    kind: str  # subscribe | subscribePattern | assign
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


def parse_subscription(opts: dict[str, str]) -> Subscription:
    given = [s for s in STRATEGIES if s.lower() in opts]
    if len(given) > 1:
        raise ValueError(
            "Only one of the options subscribe, subscribePattern, assign may be specified for the "
            f"kafkalite source (got {', '.join(given)})"
        )
    if not given:
        raise ValueError(
            "One of the options subscribe, subscribePattern, assign must be specified for the "
            "kafkalite source"
        )
    kind = given[0]
    raw = opts[kind.lower()]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise ValueError(f"No topics to subscribe to: option 'subscribe' is {raw!r}")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        if not raw.strip():
            raise ValueError(f"Pattern to subscribe is empty: option 'subscribePattern' is {raw!r}")
        try:
            re.compile(raw)
        except re.error as exc:
            raise ValueError(f"Option 'subscribePattern' is not a valid regex: {exc}") from None
        return Subscription(kind, pattern=raw)
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not all(
        isinstance(v, list) and all(isinstance(p, int) and not isinstance(p, bool) for p in v)
        for v in parsed.values()
    ):
        raise ValueError(
            f'Option \'assign\' must be JSON like {{"topicA":[0,1],"topicB":[2,4]}}, got {raw!r}'
        )
    assigned = tuple(sorted((str(t), int(p)) for t, ps in parsed.items() for p in ps))
    if not assigned:
        raise ValueError(f"No partitions to assign: option 'assign' is {raw!r}")
    return Subscription(kind, assigned=assigned)


@dataclass(frozen=True)
class SourceOptions:
    client: dict[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    starting_by_timestamp_strategy: str = "error"
    max_records_per_partition: int | None = None
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    group_id: str | None = None  # kafka.group.id: used as is (Spark warns about sharing it)
    group_id_prefix: str | None = None  # groupIdPrefix, when given
    fetch_filter: str | None = None  # kafkalite.filter, plus what pushFilters added (batch)
    extra: dict[str, Any] = field(default_factory=dict)


def _starting(opts: dict[str, str], default: str) -> OffsetSpec:
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if "startingtimestamp" in opts:
        return parse_timestamp_spec(opts["startingtimestamp"], "startingTimestamp", strategy)
    if "startingoffsetsbytimestamp" in opts:
        return parse_timestamp_spec(
            opts["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp", strategy
        )
    return parse_offset_spec(opts.get("startingoffsets"), "startingOffsets", default=default)


def _ending(opts: dict[str, str]) -> OffsetSpec | None:
    if "endingtimestamp" in opts:
        return parse_timestamp_spec(opts["endingtimestamp"], "endingTimestamp", "latest")
    if "endingoffsetsbytimestamp" in opts:
        return parse_timestamp_spec(
            opts["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp", "latest"
        )
    if "endingoffsets" in opts:
        return parse_offset_spec(opts["endingoffsets"], "endingOffsets", default="latest")
    return None


FETCH_FILTER = "kafkalite.filter"


def _fetch_filter(raw: str | None) -> str | None:
    """The `kafkalite.filter` option, checked now (a bad expression fails the query before any read)."""
    if raw is None or not raw.strip():
        return None
    from kafkalite.filters import FilterError, compile_filter

    try:
        compile_filter(raw.strip())
    except FilterError as exc:
        raise ValueError(
            f"Option '{FETCH_FILTER}' is not a valid filter expression: {exc}"
        ) from None
    return raw.strip()


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate the options of a read (batch or streaming) the way Spark's Kafka source does."""
    opts = _lower(options)
    client = kafka_params(opts, _REJECTED_SOURCE)
    sub = parse_subscription(opts)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise ValueError(
            "Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"got {strategy!r}"
        )
    starting = _starting(opts, "latest" if streaming else "earliest")
    ending = _ending(opts)
    if streaming:
        for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if name.lower() in opts:
                raise ValueError(f"Option '{name}' is not valid in streaming queries")
    else:
        if starting.kind == "latest":
            raise ValueError("startingOffsets can't be latest for batch queries")
        if starting.kind == "offsets":
            for (t, p), off in starting.offsets.items():
                if off == LATEST:
                    raise ValueError(
                        f"startingOffsets for {t}-{p} can't be latest (-1) for batch queries"
                    )
        if ending is None:
            ending = OffsetSpec("latest")
        if ending.kind == "earliest":
            raise ValueError("endingOffsets can't be earliest for batch queries")
        if ending.kind == "offsets":
            for (t, p), off in ending.offsets.items():
                if off == EARLIEST:
                    raise ValueError(
                        f"endingOffsets for {t}-{p} can't be earliest (-2) for batch queries"
                    )
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            # accepted and ignored, as Spark does for batch queries
            opts.pop(name.lower(), None)
    delay = parse_duration_ms(opts.get("maxtriggerdelay", "15m"), "maxTriggerDelay")
    poll_timeout = _positive_int(opts, "kafkaConsumer.pollTimeoutMs") or 120_000
    max_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger")
    min_per_trigger = _positive_int(opts, "minOffsetsPerTrigger")
    if max_per_trigger and min_per_trigger and min_per_trigger > max_per_trigger:
        raise ValueError(
            f"Option 'minOffsetsPerTrigger' ({min_per_trigger}) must not be greater than "
            f"'maxOffsetsPerTrigger' ({max_per_trigger})"
        )
    prefix = opts.get("groupidprefix")
    if prefix is not None and not prefix.strip():
        raise ValueError("Option 'groupIdPrefix' must not be empty")
    group_id = client.get("group.id")
    if group_id is not None and not group_id.strip():
        raise ValueError("Option 'kafka.group.id' must not be empty")
    return SourceOptions(
        client=client,
        subscription=sub,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay,
        min_partitions=_positive_int(opts, "minPartitions"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        poll_timeout_ms=poll_timeout,
        starting_by_timestamp_strategy=strategy,
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        fetch_offset_num_retries=_non_negative_int(opts, "fetchOffset.numRetries", 3),
        fetch_offset_retry_interval_ms=_non_negative_int(opts, "fetchOffset.retryIntervalMs", 10),
        group_id=group_id.strip() if group_id else None,
        group_id_prefix=prefix.strip() if prefix else None,
        fetch_filter=_fetch_filter(opts.get(FETCH_FILTER.lower())),
    )


EXACTLY_ONCE = "kafkalite.sink.exactlyOnce"
TRANSACTIONAL_ID_PREFIX = "kafkalite.sink.transactionalIdPrefix"
DEFAULT_SINK_TRANSACTION_TIMEOUT_MS = (
    900_000  # 15 min: the broker's default transaction.max.timeout.ms
)


@dataclass(frozen=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None
    exactly_once: bool = False
    transactional_id_prefix: str | None = None  # None: derived from the streaming query's id


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the options of a write the way Spark's Kafka sink does (plus the exactly-once ones)."""
    opts = _lower(options)
    client = kafka_params(opts, _REJECTED_SINK)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise ValueError("Option 'topic' must not be empty")
    if "transactional.id" in client:
        raise ValueError(
            "Kafka option 'transactional.id' is not supported: the sink uses one transactional id "
            f"per Spark partition; set '{EXACTLY_ONCE}' to 'true' (and optionally "
            f"'{TRANSACTIONAL_ID_PREFIX}') for transactional, exactly-once writes."
        )
    exactly_once = _bool(opts, EXACTLY_ONCE, False)
    prefix = opts.get(TRANSACTIONAL_ID_PREFIX.lower())
    if prefix is not None:
        if not exactly_once:
            raise ValueError(f"Option '{TRANSACTIONAL_ID_PREFIX}' needs '{EXACTLY_ONCE}' = 'true'")
        if not prefix.strip():
            raise ValueError(f"Option '{TRANSACTIONAL_ID_PREFIX}' must not be empty")
        prefix = prefix.strip()
    if exactly_once:
        client.setdefault("transaction.timeout.ms", str(DEFAULT_SINK_TRANSACTION_TIMEOUT_MS))
        for prop, needed in (("acks", ("all", "-1")), ("enable.idempotence", ("true",))):
            if prop in client and client[prop].strip().lower() not in needed:
                raise ValueError(
                    f"Kafka option '{prop}' = {client[prop]!r} conflicts with '{EXACTLY_ONCE}': "
                    "transactional writes need acks=all and idempotence"
                )
    return SinkOptions(
        client=client,
        topic=topic.strip() if topic else None,
        exactly_once=exactly_once,
        transactional_id_prefix=prefix,
    )
