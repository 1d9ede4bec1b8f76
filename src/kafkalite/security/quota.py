"""Kafka's client quota arithmetic: the sampled rate, the throttle time, and KIP-55 entity precedence;
the quota entities (user, client-id, and KIP-612's ip) and which keys each takes.

Pure and clock-free: every call takes the time in milliseconds, so tests drive it with a fake clock.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

QUOTA_WINDOW_NUM_DEFAULT = 11  # quota.window.num
QUOTA_WINDOW_SIZE_SECONDS_DEFAULT = 1  # quota.window.size.seconds
DEFAULT_ENTITY = "<default>"


@dataclass(slots=True)
class _Sample:
    value: float
    last_window_ms: int
    event_count: int = 0

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.last_window_ms = now_ms
        self.event_count = 0


@dataclass(slots=True)
class Rate:
    """A per-second rate over `samples` windows of `window_ms` each, as Kafka's `Rate` measures it.

    A sample closes when its window has elapsed; samples older than samples * window_ms are
    reset before a measurement. The elapsed time is taken as at least samples - 1 full windows,
    so a burst at start-up is not measured over a tiny interval.
    """

    samples: int = QUOTA_WINDOW_NUM_DEFAULT
    window_ms: int = QUOTA_WINDOW_SIZE_SECONDS_DEFAULT * 1000
    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0

    def __post_init__(self) -> None:
        if self.samples < 2:
            raise ValueError(f"quota.window.num must be at least 2, got {self.samples}")
        if self.window_ms < 1:
            raise ValueError(f"quota window must be at least 1 ms, got {self.window_ms}")

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.last_window_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(0.0, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % self.samples
        if self._current >= len(self._samples):
            sample = _Sample(0.0, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def window_throttle_ms(self, quota: float, now_ms: int) -> int:
        """Once the current sample holds more than one window's allowance, how long until its own
        span carries `quota` per second.

        Kafka's rate alone measures over at least samples - 1 windows, so a client that was quiet
        may send that many windows' worth at once, and again whenever a full sample expires: a
        burst every ~11 s. Bounding each sample as well keeps a throttled client near its quota in
        every window, not just on average.
        """
        if not self._samples:
            return 0
        sample = self._samples[self._current]
        if sample.value <= quota * self.window_ms / 1000.0:
            return 0  # within one window's allowance: a client under its quota is never throttled
        due = sample.last_window_ms + sample.value / quota * 1000.0
        return max(0, _java_round(due - now_ms))

    def _purge_obsolete(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_window_ms >= expire_age:
                sample.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate is measured over: at least samples - 1 windows, never below 1 ms."""
        self._purge_obsolete(now_ms)
        oldest = min(s.last_window_ms for s in self._samples) if self._samples else now_ms
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def total(self, now_ms: int) -> float:
        self._purge_obsolete(now_ms)
        return sum(s.value for s in self._samples)

    def measure(self, now_ms: int) -> float:
        """Units per second (bytes/s for a bandwidth quota, percent for a request quota)."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def _java_round(x: float) -> int:
    return math.floor(x + 0.5)


def throttle_time_ms(observed_rate: float, quota: float, window_size_ms: int) -> int:
    """How long the client waits for the rate to fall back to the quota if it sends nothing more.

    With observed rate O over a window W and quota T: O * W / (W + X) = T, so X = (O - T) / T * W.
    Zero when the rate is within the quota.
    """
    if quota <= 0:
        raise ValueError(f"quota must be positive, got {quota}")
    if observed_rate <= quota:
        return 0
    return _java_round((observed_rate - quota) / quota * window_size_ms)


@dataclass(slots=True)
class QuotaSensor:
    """One client's (or user's) usage against one quota: record, then learn the throttle time."""

    quota: float
    rate: Rate = field(default_factory=Rate)
    max_throttle_time_ms: int | None = None
    # kafkalite's addition (Rate.window_throttle_ms); False gives Kafka's arithmetic exactly
    bound_each_window: bool = True

    def record(self, value: float, now_ms: int) -> int:
        """Record usage (bytes, or request-handler time as a percentage) and return the throttle in ms.

        Like Kafka, the usage is always recorded first; a request over the quota still succeeds
        and the client is throttled afterwards.
        """
        self.rate.record(value, now_ms)
        throttle = self.rate.window_throttle_ms(self.quota, now_ms) if self.bound_each_window else 0
        observed = self.rate.measure(now_ms)
        if observed > self.quota:
            window = self.rate.window_size_ms(now_ms)
            throttle = max(throttle, throttle_time_ms(observed, self.quota, window))
        if throttle <= 0:
            return 0
        if self.max_throttle_time_ms is not None:
            throttle = min(throttle, self.max_throttle_time_ms)
        return throttle


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """Where a quota is configured: `None` means the dimension is absent, `<default>` the default.

    QuotaEntity("alice", None) is /config/users/alice; QuotaEntity("<default>", "app") is
    /config/users/<default>/clients/app; QuotaEntity(None, "<default>") is /config/clients/<default>.
    QuotaEntity(ip="10.0.0.1") is /config/ips/10.0.0.1 (KIP-612: an ip entity stands alone).
    """

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None

    def __post_init__(self) -> None:
        if self.ip is not None:
            if self.user is not None or self.client_id is not None:
                raise ValueError(IP_COMBINATION_ERROR)
            return
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity names a user, a client-id, or both")


@dataclass(frozen=True, slots=True)
class QuotaMatch:
    """The quota that applies, the entity it came from, and the (user, client-id) metric tags.

    Clients with equal tags share one sensor: a user quota is shared across all that user's
    client-ids, a client-id quota across all users with that client-id.
    """

    quota: float
    entity: QuotaEntity
    user_tag: str
    client_id_tag: str


def precedence(user: str, client_id: str) -> list[QuotaEntity]:
    """KIP-55's eight places to look, most specific first."""
    d = DEFAULT_ENTITY
    return [
        QuotaEntity(user, client_id),
        QuotaEntity(user, d),
        QuotaEntity(user, None),
        QuotaEntity(d, client_id),
        QuotaEntity(d, d),
        QuotaEntity(d, None),
        QuotaEntity(None, client_id),
        QuotaEntity(None, d),
    ]


def resolve_quota(
    quotas: Mapping[QuotaEntity, float], user: str, client_id: str
) -> QuotaMatch | None:
    """The quota for a connection of `user` (principal name) and `client_id`, or None if unlimited."""
    for entity in precedence(user, client_id):
        quota = quotas.get(entity)
        if quota is not None:
            return QuotaMatch(
                quota,
                entity,
                user if entity.user is not None else "",
                client_id if entity.client_id is not None else "",
            )
    return None


# -- quota configuration keys (Kafka's names) and what values they take
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"  # KIP-612, the only key of an ip entity
CLIENT_QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
IP_QUOTA_KEYS = (CONNECTION_CREATION_RATE,)
QUOTA_KEYS = CLIENT_QUOTA_KEYS + IP_QUOTA_KEYS
_LONG_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})
_INT_KEYS = frozenset({CONNECTION_CREATION_RATE})  # Kafka's type INT, at least 0
IP_RATE_UNLIMITED = 2**31 - 1  # Kafka's default connection_creation_rate (Int.MaxValue): no quota
IP_COMBINATION_ERROR = (
    "Invalid quota entity combination, IP entity should not be used with user/client ID entity."
)

# entity types as the admin protocol names them
ENTITY_USER = "user"
ENTITY_CLIENT_ID = "client-id"
ENTITY_IP = "ip"


def validate_quota_value(key: str, value: float, entity: QuotaEntity | None = None) -> str | None:
    """Why `key = value` cannot be a quota (of `entity`, when given: an ip entity takes only
    connection_creation_rate, user and client-id entities only the client keys), or None."""
    if key == CONTROLLER_MUTATION_RATE:
        return (
            "controller_mutation_rate quotas are not enforced by kafkalite, so they cannot be set"
        )
    if entity is not None and entity.ip is not None:
        if key not in IP_QUOTA_KEYS:
            return (
                f"Invalid configuration key {key!r} for an ip entity: "
                f"it takes only {CONNECTION_CREATION_RATE}"
            )
    elif entity is not None and key in IP_QUOTA_KEYS:
        return f"{key} is a quota of ip entities, not of user or client-id entities"
    elif key not in QUOTA_KEYS:
        return f"Unknown quota key {key!r} (known: {', '.join(QUOTA_KEYS)})"
    if key in _INT_KEYS:
        if not math.isfinite(value) or value < 0 or value > IP_RATE_UNLIMITED:
            return f"{key} must be between 0 and {IP_RATE_UNLIMITED}, got {value}"
        if value != math.floor(value):
            return f"Configuration {key} must be a INT value, got {value}"
        return None
    if not math.isfinite(value) or value <= 0:
        return f"{key} must be positive, got {value}"
    if key in _LONG_KEYS and value != math.floor(value):
        return f"{key} must be a whole number of bytes per second, got {value}"
    return None


def format_quota_value(key: str, value: float) -> str:
    """The value as Kafka writes it in a config znode: a long for byte rates, a double otherwise."""
    return str(int(value)) if key in _LONG_KEYS or key in _INT_KEYS else repr(float(value))


def canonical_ip(name: str) -> str:
    """An ip entity's name as kafkalite keeps it: the address in its canonical text (`::1`,
    `10.0.0.1`); ValueError for anything else (Kafka also resolves host names; kafkalite does not)."""
    try:
        return ipaddress.ip_address(name.strip()).compressed
    except ValueError:
        raise ValueError(
            f"{name} is not a valid IP address (kafkalite's ip quota entities are IP "
            "addresses, not host names)"
        ) from None


def entity_from_parts(parts: Mapping[str, str | None]) -> QuotaEntity:
    """An entity from the admin protocol's (type -> name or null for the default) pairs."""
    unknown = set(parts) - {ENTITY_USER, ENTITY_CLIENT_ID, ENTITY_IP}
    if unknown:
        raise ValueError(f"Unknown quota entity type(s): {', '.join(sorted(unknown))}")
    if ENTITY_IP in parts:
        if len(parts) > 1:
            raise ValueError(IP_COMBINATION_ERROR)
        ip = parts[ENTITY_IP]
        if ip == "":
            raise ValueError("an empty ip is not a quota entity; null means the default")
        return QuotaEntity(ip=DEFAULT_ENTITY if ip is None else canonical_ip(ip))

    def name(kind: str) -> str | None:
        if kind not in parts:
            return None
        value = parts[kind]
        if value == "":
            raise ValueError(f"an empty {kind} name is not a quota entity; null means the default")
        return DEFAULT_ENTITY if value is None else value

    return QuotaEntity(name(ENTITY_USER), name(ENTITY_CLIENT_ID))


def entity_parts(entity: QuotaEntity) -> list[tuple[str, str | None]]:
    """The admin protocol's (type, name or null for the default) pairs of an entity."""
    out: list[tuple[str, str | None]] = []
    for kind, value in _names(entity):
        if value is not None:
            out.append((kind, None if value == DEFAULT_ENTITY else value))
    return out


def _names(entity: QuotaEntity) -> tuple[tuple[str, str | None], ...]:
    return (
        (ENTITY_USER, entity.user),
        (ENTITY_CLIENT_ID, entity.client_id),
        (ENTITY_IP, entity.ip),
    )


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    """One DescribeClientQuotas component: match an exact name, the default, or any specified name."""

    entity_type: str
    match_type: int  # 0 exact, 1 default, 2 any specified name
    match: str | None = None

    def accepts(self, entity: QuotaEntity) -> bool:
        value = dict(_names(entity)).get(self.entity_type)
        if value is None:
            return False
        if self.match_type == 0:
            return value != DEFAULT_ENTITY and value == self.match
        if self.match_type == 1:
            return value == DEFAULT_ENTITY
        return value != DEFAULT_ENTITY


def validate_filters(filters: list[QuotaFilter]) -> str | None:
    """Why a DescribeClientQuotas filter is invalid, or None."""
    seen: set[str] = set()
    for f in filters:
        if f.entity_type not in (ENTITY_USER, ENTITY_CLIENT_ID, ENTITY_IP):
            return f"Unknown quota entity type {f.entity_type!r}"
        if f.entity_type in seen:
            return f"Duplicate {f.entity_type} filter component entity type"
        seen.add(f.entity_type)
        if f.match_type not in (0, 1, 2):
            return f"Unknown match type {f.match_type}"
        if f.match_type == 0 and f.match is None:
            return "An exact match needs a name"
        if f.match_type != 0 and f.match is not None:
            return "Only an exact match takes a name"
    if ENTITY_IP in seen and len(seen) > 1:
        return (
            "Invalid entity filter component combination, IP filter component should not be "
            "used with user or clientId filter component."
        )
    return None


def matching_entities(
    entities: Iterable[QuotaEntity], filters: list[QuotaFilter], strict: bool
) -> list[QuotaEntity]:
    """The entities every filter component accepts; strict also excludes entities with a type the
    filter does not mention (Kafka's DescribeClientQuotas semantics)."""
    kinds = {f.entity_type for f in filters}
    out = []
    for entity in entities:
        if not all(f.accepts(entity) for f in filters):
            continue
        if strict:
            present = {k for k, v in _names(entity) if v is not None}
            if present - kinds:
                continue
        out.append(entity)
    return out


SENSOR_IDLE_EXPIRY_MS = 3600 * 1000  # Kafka drops a client's quota sensors after an idle hour


@dataclass(slots=True)
class _TrackedSensor:
    sensor: QuotaSensor
    last_used_ms: int


class ClientQuotaManager:
    """The quotas of one kind (produce bytes, fetch bytes or request time) and the sensors that
    measure clients against them. Pure: callers pass the time; nothing is measured without a quota."""

    def __init__(
        self,
        key: str,
        samples: int = QUOTA_WINDOW_NUM_DEFAULT,
        window_ms: int = QUOTA_WINDOW_SIZE_SECONDS_DEFAULT * 1000,
        max_throttle_time_ms: int | None = None,
    ) -> None:
        Rate(samples, window_ms)  # validates the window settings once
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_time_ms = max_throttle_time_ms
        self._quotas: dict[QuotaEntity, float] = {}
        self._resolved: dict[tuple[str, str], QuotaMatch | None] = {}
        self._sensors: dict[tuple[str, str], _TrackedSensor] = {}
        self._next_expiry_ms = 0

    @property
    def enabled(self) -> bool:
        """Whether any entity has a quota of this kind (when not, recording is skipped entirely)."""
        return bool(self._quotas)

    def update_quotas(self, quotas: Mapping[QuotaEntity, float]) -> None:
        """Replace the configured quotas; each sensor takes its new quota on its next record."""
        self._quotas = dict(quotas)
        self._resolved.clear()

    def quota_for(self, user: str, client_id: str) -> QuotaMatch | None:
        key = (user, client_id)
        try:
            return self._resolved[key]
        except KeyError:
            match = self._resolved[key] = resolve_quota(self._quotas, user, client_id)
            return match

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most one window may carry (Kafka caps a throttled consumer's fetch size with it)."""
        match = self.quota_for(user, client_id)
        return None if match is None else match.quota * self.window_ms / 1000.0

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record usage of (`user`, `client_id`) and return how long to throttle it, in ms."""
        match = self.quota_for(user, client_id)
        if match is None:
            return 0
        tags = (match.user_tag, match.client_id_tag)
        tracked = self._sensors.get(tags)
        if tracked is None:
            tracked = self._sensors[tags] = _TrackedSensor(
                QuotaSensor(
                    match.quota,
                    Rate(self.samples, self.window_ms),
                    self.max_throttle_time_ms,
                ),
                now_ms,
            )
        tracked.sensor.quota = match.quota
        tracked.last_used_ms = now_ms
        if now_ms >= self._next_expiry_ms:
            self._expire(now_ms)
        return tracked.sensor.record(value, now_ms)

    def _expire(self, now_ms: int) -> None:
        self._next_expiry_ms = now_ms + 60_000
        for tags in [
            t for t, s in self._sensors.items() if now_ms - s.last_used_ms >= SENSOR_IDLE_EXPIRY_MS
        ]:
            del self._sensors[tags]

    def sensor_count(self) -> int:
        return len(self._sensors)
