"""Kafka's connection quotas (KIP-402, KIP-612): max.connections broker-wide and per listener, max.connections.per.ip
with its overrides, max.connection.creation.rate broker-wide and per listener, and the ip entities'
connection_creation_rate (per address, a token bucket each); refusals logged at a bounded rate.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkalite.broker.config.broker_config import ConfigError
from kafkalite.broker.config.config_defs import CONNECTION_QUOTA_CONFIGS
from kafkalite.security.quota import DEFAULT_ENTITY

if TYPE_CHECKING:
    from kafkalite.broker.network.connection import Connection

log = logging.getLogger("kafkalite.broker.connection_quotas")

INT_MAX = 2**31 - 1
LISTENER_PREFIX = "listener.name."
# the per-listener spellings Kafka accepts: listener.name.<listener>.max.connections / ...rate
LISTENER_QUOTA_SUFFIXES = ("max.connections", "max.connection.creation.rate")
REFUSAL_LOG_INTERVAL_S = 10.0
REFUSAL_LOG_MAX_KEYS = 1024  # past this many reasons, the quiet ones are forgotten
# Kafka bounds a connection's throttle time by one quota window (quota.window.size.seconds, 1 s)
IP_THROTTLE_MAX_S = 1.0
IP_BUCKET_SWEEP_S = 10.0  # how often full (idle) per-address buckets are dropped


__all__ = [
    "CONNECTION_QUOTA_CONFIGS",
    "ConnectionLimits",
    "ConnectionQuotas",
    "ConnectionSlot",
    "Throttled",
]


def is_listener_quota_config(name: str) -> bool:
    """`listener.name.<listener>.max.connections` or `.max.connection.creation.rate`."""
    if not name.startswith(LISTENER_PREFIX):
        return False
    _, _, rest = name[len(LISTENER_PREFIX) :].partition(".")
    return rest in LISTENER_QUOTA_SUFFIXES


def _int(props: Mapping[str, str], name: str) -> int:
    raw = props.get(name)
    if raw is None or str(raw).strip() == "":
        return INT_MAX
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"{name}={raw}: not an integer") from None
    if value < 0:
        raise ConfigError(f"{name}={raw}: must be >= 0")
    return value


def parse_ip_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:count` pairs, comma-separated; host names are
    resolved to addresses now (as Kafka does when the setting is read)."""
    out: dict[str, int] = {}
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(
                f"max.connections.per.ip.overrides: {item!r} is not host:count "
                "(e.g. 127.0.0.1:200,myhost:100)"
            )
        try:
            addr = socket.getaddrinfo(host, None)[0][4][0]
        except OSError as exc:
            raise ConfigError(
                f"max.connections.per.ip.overrides: cannot resolve {host}: {exc}"
            ) from None
        out[str(addr)] = int(count)
    return out


@dataclass(frozen=True)
class ConnectionLimits:
    """The limits in force; INT_MAX (Kafka's default, Int.MaxValue) means none."""

    max_connections: int = INT_MAX
    per_ip: int = INT_MAX
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    creation_rate: int = INT_MAX
    listener_max: dict[str, int] = field(default_factory=dict)
    listener_rate: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def from_props(props: Mapping[str, str]) -> ConnectionLimits:
        """The limits a broker's (effective) properties set; ConfigError on a bad value."""
        overrides = parse_ip_overrides(str(props.get("max.connections.per.ip.overrides") or ""))
        per_ip = _int(props, "max.connections.per.ip")
        if per_ip == 0 and not overrides:
            raise ConfigError(
                "max.connections.per.ip=0 refuses every connection: it may be 0 only when "
                "max.connections.per.ip.overrides names the addresses allowed in"
            )
        listener_max: dict[str, int] = {}
        listener_rate: dict[str, int] = {}
        for k in props:
            if is_listener_quota_config(k):
                lname, _, rest = k[len(LISTENER_PREFIX) :].partition(".")
                target = listener_max if rest == "max.connections" else listener_rate
                target[lname.upper()] = _int(props, k)
        return ConnectionLimits(
            max_connections=_int(props, "max.connections"),
            per_ip=per_ip,
            per_ip_overrides=overrides,
            creation_rate=_int(props, "max.connection.creation.rate"),
            listener_max=listener_max,
            listener_rate=listener_rate,
        )

    def ip_limit(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.per_ip)


class TokenBucket:
    """A connection creation rate: `rate` per second on average, bursts of up to `rate` (one
    second's worth, at least one connection) allowed."""

    __slots__ = ("rate", "tokens", "stamp")

    def __init__(self, rate: float, now: float | None = None) -> None:
        self.rate = rate
        self.tokens = self.capacity
        self.stamp = time.monotonic() if now is None else now

    @property
    def capacity(self) -> float:
        return float(max(self.rate, 1))

    def set_rate(self, rate: float, now: float) -> None:
        """A new rate from now on: a higher one adds its larger burst at once, a lower one keeps
        what was saved up, up to its own burst size."""
        self.delay(now)
        old_capacity = self.capacity
        self.rate = rate
        self.tokens = min(self.capacity, self.tokens + max(0.0, self.capacity - old_capacity))

    def full(self, now: float) -> bool:
        """Refilled to its burst size: no different from a new bucket, so it may be dropped."""
        return self.delay(now) == 0.0 and self.tokens >= self.capacity

    def delay(self, now: float) -> float:
        """Seconds until one more connection may be created (0: now; no token is taken)."""
        if self.rate >= INT_MAX:
            return 0.0
        if self.rate <= 0:
            return 1.0
        self.tokens = min(self.capacity, self.tokens + max(0.0, now - self.stamp) * self.rate)
        self.stamp = now
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self) -> None:
        if self.rate < INT_MAX:
            self.tokens -= 1.0


class RefusalLog:
    """One warning per reason per interval: the first refusal is logged at once, later ones are
    counted and reported with the next line (10,000 refused connections make a few lines)."""

    def __init__(self, interval_s: float = REFUSAL_LOG_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warn(self, key: str, message: str, *args: object) -> None:
        now = time.monotonic()
        if len(self._last) >= REFUSAL_LOG_MAX_KEYS and key not in self._last:
            self._forget_quiet(now)
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._last[key] = now
        more = self._suppressed.pop(key, 0)
        if more:
            message += " (and %d more like this in the last %.0f s)"
            args = (*args, more, now - last if last is not None else 0.0)
        log.warning(message, *args)

    def _forget_quiet(self, now: float) -> None:
        """Drop the reasons (often one per address) not logged within the interval: their next
        refusal is logged at once, as it would be anyway, and the memory stays bounded."""
        for key in [k for k, t in self._last.items() if now - t >= self.interval_s]:
            del self._last[key]
            self._suppressed.pop(key, None)


class Throttled:
    """A connection over its address's connection_creation_rate (KIP-612): accepted, never read,
    and closed after `close_after_s` (Kafka closes a throttled connection once its throttle time
    has passed, so a client reconnecting at once cannot spin)."""

    __slots__ = ("close_after_s",)

    def __init__(self, close_after_s: float) -> None:
        self.close_after_s = close_after_s


class ConnectionSlot:
    """One admitted connection's share of the counts; `release()` (idempotent) gives it back."""

    __slots__ = ("quotas", "listener", "ip", "released")

    def __init__(self, quotas: ConnectionQuotas, listener: str, ip: str) -> None:
        self.quotas = quotas
        self.listener = listener
        self.ip = ip
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.quotas._release(self)


class ConnectionQuotas:
    """Counts of open connections (broker, listener, address) and the decisions of Kafka's
    ConnectionQuotas: a listener at its limit, or the broker at max.connections, stops accepting
    until a connection closes; an address at its per-IP limit has the new connection closed at
    once; creation rates delay accepting. The inter-broker listener (when there is more than one
    listener) is exempt from the broker-wide limit and rate: at max.connections it still accepts,
    and the least recently active connection of another listener is closed to make room."""

    def __init__(
        self,
        limits: ConnectionLimits,
        listeners: Iterable[str],
        inter_broker_listener: str,
        close_lru: Callable[[str], bool] | None = None,
    ) -> None:
        self.limits = limits
        self.listeners = [name.upper() for name in listeners]
        self.inter_broker_listener = inter_broker_listener.upper()
        self.close_lru = close_lru
        self.total = 0
        self.per_listener: dict[str, int] = dict.fromkeys(self.listeners, 0)
        self.per_ip: dict[str, int] = {}
        self.refused_per_ip = 0
        self._broker_rate = TokenBucket(limits.creation_rate)
        self._listener_rate = {
            n: TokenBucket(limits.listener_rate.get(n, INT_MAX)) for n in self.listeners
        }
        self._waiters: list[asyncio.Future[None]] = []
        self.refusals = RefusalLog()
        # KIP-612 ip entities: connection_creation_rate per address, else the `<default>` one
        self.ip_rates: dict[str, float] = {}
        self.ip_default_rate: float = INT_MAX
        self._ip_buckets: dict[str, TokenBucket] = {}
        self._next_ip_sweep = 0.0
        self.throttled_per_ip_rate = 0

    def reconfigure(self, limits: ConnectionLimits) -> None:
        """New limits (AlterConfigs): open connections stay; waiting acceptors re-check."""
        old = self.limits
        self.limits = limits
        if limits.creation_rate != old.creation_rate:
            self._broker_rate = TokenBucket(limits.creation_rate)
        for n in self.listeners:
            rate = limits.listener_rate.get(n, INT_MAX)
            if rate != self._listener_rate[n].rate:
                self._listener_rate[n] = TokenBucket(rate)
        if limits != old:
            log.info("connection quotas now %s", limits)
        self._wake()

    def update_ip_quotas(self, quotas: Mapping[str, float], now: float | None = None) -> None:
        """The ip entities' connection_creation_rate ({address or `<default>`: rate}), from the
        client quotas on every change; new connections see them at once."""
        rates: dict[str, float] = {}
        for name, rate in quotas.items():
            if name == DEFAULT_ENTITY:
                continue
            try:  # as the accepted peers' addresses are spelt
                rates[_quota_address(ipaddress.ip_address(name).compressed)] = rate
            except ValueError:
                log.warning(
                    "ignoring the connection_creation_rate of ip entity %r: not an IP", name
                )
        default = quotas.get(DEFAULT_ENTITY, INT_MAX)
        if rates == self.ip_rates and default == self.ip_default_rate:
            return
        self.ip_rates, self.ip_default_rate = rates, default
        now = time.monotonic() if now is None else now
        for ip, bucket in list(self._ip_buckets.items()):
            rate = self.ip_rate(ip)
            if rate >= INT_MAX or rate <= 0:
                del self._ip_buckets[ip]
            elif rate != bucket.rate:
                bucket.set_rate(rate, now)
        log.info(
            "ip connection_creation_rate quotas now: default %s, %d address(es) of their own",
            "none" if default >= INT_MAX else f"{default:g}/s",
            len(rates),
        )

    def ip_rate(self, ip: str) -> float:
        """The connection_creation_rate of an address (INT_MAX: none)."""
        return self.ip_rates.get(_quota_address(ip), self.ip_default_rate)

    def ip_bucket_count(self) -> int:
        return len(self._ip_buckets)

    def _ip_throttle(self, ip: str, now: float) -> float:
        """Seconds to throttle a new connection from `ip` for its connection_creation_rate (0: it
        is within the rate, and counted against it)."""
        ip = _quota_address(ip)
        if now >= self._next_ip_sweep:
            self._next_ip_sweep = now + IP_BUCKET_SWEEP_S
            for idle in [a for a, b in self._ip_buckets.items() if b.full(now)]:
                del self._ip_buckets[idle]
        rate = self.ip_rate(ip)
        if rate >= INT_MAX:
            return 0.0
        if rate <= 0:  # a quota of 0 lets nothing in from there
            return IP_THROTTLE_MAX_S
        bucket = self._ip_buckets.get(ip)
        if bucket is None:
            bucket = self._ip_buckets[ip] = TokenBucket(rate, now)
        delay = bucket.delay(now)
        if delay > 0:
            return min(delay, IP_THROTTLE_MAX_S)
        bucket.take()
        return 0.0

    def protected(self, listener: str) -> bool:
        return listener == self.inter_broker_listener and len(self.listeners) > 1

    # -- accepting
    def _blocked_by(self, listener: str) -> str | None:
        """Why `listener` may not accept now, as the property to raise, or None."""
        lmax = self.limits.listener_max.get(listener, INT_MAX)
        if self.per_listener.get(listener, 0) >= lmax:
            return f"listener.name.{listener.lower()}.max.connections={lmax}"
        if not self.protected(listener) and self.total >= self.limits.max_connections:
            return f"max.connections={self.limits.max_connections}"
        return None

    def may_accept(self, listener: str) -> bool:
        return self._blocked_by(listener) is None

    def give_back(self, listener: str) -> None:
        """Return the creation-rate token `accept_delay` took for an accept that found nothing."""
        lb = self._listener_rate.get(listener)
        if lb is not None and lb.rate < INT_MAX:
            lb.tokens += 1.0
        if not self.protected(listener) and self._broker_rate.rate < INT_MAX:
            self._broker_rate.tokens += 1.0

    async def wait_for_slot(self, listener: str) -> None:
        """Return once `listener` may accept one more connection (Kafka blocks its acceptor)."""
        while (why := self._blocked_by(listener)) is not None:
            self.refusals.warn(
                "slot:" + listener,
                "listener %s stopped accepting: %s reached with %d connections open (%d on this "
                "listener); new clients wait in the listen backlog until one closes. Raise %s "
                "if the broker can take more",
                listener,
                why,
                self.total,
                self.per_listener.get(listener, 0),
                why.split("=")[0],
            )
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:
                if fut in self._waiters:
                    self._waiters.remove(fut)

    def accept_delay(self, listener: str) -> float:
        """Seconds to wait before accepting on `listener` for the creation rates (0: accept now,
        and the connection is counted against them)."""
        now = time.monotonic()
        lb = self._listener_rate.get(listener)
        delay = lb.delay(now) if lb is not None else 0.0
        broker_wide = not self.protected(listener)
        if broker_wide:
            delay = max(delay, self._broker_rate.delay(now))
        if delay > 0:
            self.refusals.warn(
                "rate:" + listener,
                "listener %s: connection creation throttled by %s (waiting %.0f ms before "
                "accepting); raise it if clients legitimately connect this fast",
                listener,
                f"listener.name.{listener.lower()}.max.connection.creation.rate"
                if lb is not None and lb.delay(now) > 0
                else "max.connection.creation.rate",
                delay * 1000,
            )
            return delay
        if lb is not None:
            lb.take()
        if broker_wide:
            self._broker_rate.take()
        return 0.0

    def admit(
        self, listener: str, ip: str, peer: str, now: float | None = None
    ) -> ConnectionSlot | Throttled | None:
        """Count an accepted connection; Throttled when its address is over its ip entity's
        connection_creation_rate (the caller closes it after the delay), None when the address is
        at max.connections.per.ip (the caller closes it at once). As in Kafka, the rate is
        checked first."""
        throttle = self._ip_throttle(ip, time.monotonic() if now is None else now)
        if throttle > 0:
            self.throttled_per_ip_rate += 1
            rate = self.ip_rate(ip)
            self.refusals.warn(
                "ip-rate",
                "throttled new connection %s on listener %s: %s is over its connection creation "
                "rate quota of %g/s (ip entity %s); it is closed unanswered after %.0f ms. Raise "
                "connection_creation_rate of that ip entity (AlterClientQuotas) if clients there "
                "legitimately connect this fast",
                peer,
                listener,
                ip,
                rate,
                ip if _quota_address(ip) in self.ip_rates else DEFAULT_ENTITY,
                throttle * 1000,
            )
            return Throttled(throttle)
        limit = self.limits.ip_limit(ip)
        count = self.per_ip.get(ip, 0)
        if count >= limit:
            self.refused_per_ip += 1
            name = (
                f"max.connections.per.ip.overrides ({ip}:{limit})"
                if ip in self.limits.per_ip_overrides
                else f"max.connections.per.ip={limit}"
            )
            self.refusals.warn(
                "ip:" + ip,
                "closed new connection %s on listener %s: %s already has %d connections open, "
                "the limit of %s; close idle clients there or raise the limit for it in "
                "max.connections.per.ip.overrides",
                peer,
                listener,
                ip,
                count,
                name,
            )
            return None
        self.per_ip[ip] = count + 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) + 1
        self.total += 1
        # KIP-402: the inter-broker listener is never starved by clients
        if (
            self.protected(listener)
            and self.total > self.limits.max_connections
            and self.close_lru is not None
            and self.close_lru(listener)
        ):
            self.refusals.warn(
                "lru",
                "max.connections=%d reached: closed the least recently active client "
                "connection to admit inter-broker connection %s on listener %s",
                self.limits.max_connections,
                peer,
                listener,
            )
        return ConnectionSlot(self, listener, ip)

    def _release(self, slot: ConnectionSlot) -> None:
        self.total -= 1
        self.per_listener[slot.listener] = self.per_listener.get(slot.listener, 1) - 1
        left = self.per_ip.get(slot.ip, 1) - 1
        if left > 0:
            self.per_ip[slot.ip] = left
        else:
            self.per_ip.pop(slot.ip, None)
        self._wake()

    def _wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)


def _quota_address(ip: str) -> str:
    """An accepted peer's address as ip entities name it: an IPv4 client of a dual-stack listener
    (`::ffff:10.0.0.1`) is its IPv4 address."""
    if ip.startswith("::ffff:") and "." in ip:
        return ip[7:]
    return ip


def close_least_recently_active(connections: Iterable[Connection], protected_listener: str) -> bool:
    """KIP-402: make room for an inter-broker connection at max.connections by closing the client
    connection (of another listener) that has been quiet the longest."""
    candidates = [
        c
        for c in connections
        if not c.closed and (c.listener_name or "").upper() != protected_listener
    ]
    if not candidates:
        return False
    victim = min(candidates, key=lambda c: c.last_activity)
    log.info(
        "closing %s on listener %s: the least recently active connection, to make room for an "
        "inter-broker connection at max.connections",
        victim.peer,
        victim.listener_name,
    )
    victim.close()
    return True
