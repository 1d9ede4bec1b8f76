"""Kafka's client quota arithmetic: the sampled rate, the throttle time, and KIP-55 entity precedence.

Pure and clock-free: every call takes the time in milliseconds, so tests drive it with a fake clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
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

    def record(self, value: float, now_ms: int) -> int:
        """Record usage (bytes, or request-handler time as a percentage) and return the throttle in ms.

        Like Kafka, the usage is always recorded first; a request over the quota still succeeds
        and the client is throttled afterwards.
        """
        self.rate.record(value, now_ms)
        observed = self.rate.measure(now_ms)
        if observed <= self.quota:
            return 0
        throttle = throttle_time_ms(observed, self.quota, self.rate.window_size_ms(now_ms))
        if self.max_throttle_time_ms is not None:
            throttle = min(throttle, self.max_throttle_time_ms)
        return throttle


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """Where a quota is configured: `None` means the dimension is absent, `<default>` the default.

    QuotaEntity("alice", None) is /config/users/alice; QuotaEntity("<default>", "app") is
    /config/users/<default>/clients/app; QuotaEntity(None, "<default>") is /config/clients/<default>.
    """

    user: str | None = None
    client_id: str | None = None

    def __post_init__(self) -> None:
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
