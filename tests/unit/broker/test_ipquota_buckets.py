"""KIP-612's per-IP connection creation rate in the connection quotas: a token bucket per address
(its own quota, else the default), throttled connections, dynamic changes, idle buckets dropped."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from kafkalite.broker.network.connection_quotas import (
    IP_BUCKET_SWEEP_S,
    IP_THROTTLE_MAX_S,
    REFUSAL_LOG_MAX_KEYS,
    ConnectionLimits,
    ConnectionQuotas,
    ConnectionSlot,
    RefusalLog,
    Throttled,
)
from kafkalite.broker.security.client_quotas import ClientQuotas
from kafkalite.cluster.metadata import LocalMetadataStore
from kafkalite.security.quota import DEFAULT_ENTITY, IP_RATE_UNLIMITED, QuotaEntity

D = DEFAULT_ENTITY
RATE = "connection_creation_rate"
T0 = 1000.0


def quotas(**limits: int) -> ConnectionQuotas:
    return ConnectionQuotas(ConnectionLimits(**limits), ["PLAINTEXT"], "PLAINTEXT")


def admit_burst(q: ConnectionQuotas, ip: str, n: int, now: float) -> list[object]:
    return [q.admit("PLAINTEXT", ip, f"{ip}:{40000 + i}", now=now) for i in range(n)]


def test_an_address_over_its_rate_is_throttled_and_not_counted() -> None:
    q = quotas()
    q.update_ip_quotas({"10.0.0.1": 5})
    got = admit_burst(q, "10.0.0.1", 8, T0)
    assert all(isinstance(s, ConnectionSlot) for s in got[:5])  # one second's worth at once
    assert all(isinstance(s, Throttled) for s in got[5:])
    first = got[5]
    assert isinstance(first, Throttled) and first.close_after_s == pytest.approx(0.2)
    assert q.throttled_per_ip_rate == 3
    assert q.per_ip == {"10.0.0.1": 5} and q.total == 5  # the throttled ones hold no slot
    # other addresses have no quota at all
    assert all(isinstance(s, ConnectionSlot) for s in admit_burst(q, "10.0.0.2", 20, T0))
    # the bucket refills at the rate: one more every 0.2 s
    assert isinstance(q.admit("PLAINTEXT", "10.0.0.1", "p", now=T0 + 0.21), ConnectionSlot)
    assert isinstance(q.admit("PLAINTEXT", "10.0.0.1", "p", now=T0 + 0.22), Throttled)
    two = admit_burst(q, "10.0.0.1", 3, T0 + 0.62)
    assert [isinstance(s, ConnectionSlot) for s in two] == [True, True, False]


def test_the_default_applies_to_every_address_without_its_own() -> None:
    q = quotas()
    q.update_ip_quotas({D: 2, "10.0.0.9": 4, "10.0.0.8": IP_RATE_UNLIMITED})
    for ip, allowed in (("10.0.0.1", 2), ("10.0.0.2", 2), ("10.0.0.9", 4), ("10.0.0.8", 30)):
        got = admit_burst(q, ip, 30, T0)
        assert sum(isinstance(s, ConnectionSlot) for s in got) == allowed, ip
    assert q.ip_rate("10.0.0.3") == 2 and q.ip_rate("10.0.0.9") == 4
    # an IPv4 client of a dual-stack listener is its IPv4 address
    assert q.ip_rate("::ffff:10.0.0.9") == 4


def test_a_rate_of_zero_lets_nothing_in_and_throttles_at_most_one_window() -> None:
    q = quotas()
    q.update_ip_quotas({"10.0.0.1": 0})
    got = admit_burst(q, "10.0.0.1", 3, T0)
    assert all(isinstance(s, Throttled) and s.close_after_s == IP_THROTTLE_MAX_S for s in got)
    q.update_ip_quotas(
        {"10.0.0.1": 0.5}, now=T0
    )  # slower than one a second: throttles stay bounded
    admit_burst(q, "10.0.0.1", 1, T0)
    late = q.admit("PLAINTEXT", "10.0.0.1", "p", now=T0)
    assert isinstance(late, Throttled) and late.close_after_s == IP_THROTTLE_MAX_S


def test_changes_apply_to_new_connections_at_once() -> None:
    q = quotas()
    q.update_ip_quotas({D: 100})
    assert sum(isinstance(s, ConnectionSlot) for s in admit_burst(q, "10.0.0.1", 10, T0)) == 10
    # lowered: what was saved up is capped at the new burst size
    q.update_ip_quotas({D: 3}, now=T0)
    got = admit_burst(q, "10.0.0.1", 10, T0)
    assert sum(isinstance(s, ConnectionSlot) for s in got) == 3
    # a specific quota overrides the default for its address only
    q.update_ip_quotas({D: 3, "10.0.0.1": 50}, now=T0)
    got = admit_burst(q, "10.0.0.1", 60, T0)
    assert sum(isinstance(s, ConnectionSlot) for s in got) == 50 - 3  # raised: its larger burst
    # removed: no quota, and its bucket is gone
    q.update_ip_quotas({}, now=T0 + 0.1)
    assert q.ip_bucket_count() == 0
    assert all(isinstance(s, ConnectionSlot) for s in admit_burst(q, "10.0.0.1", 50, T0 + 0.1))


def test_idle_buckets_are_dropped() -> None:
    q = quotas()
    q.update_ip_quotas({D: 10})
    for i in range(500):
        q.admit("PLAINTEXT", f"10.1.{i // 250}.{i % 250}", "p", now=T0)
    assert q.ip_bucket_count() == 500
    # a bucket refilled to its burst size is the same as none: the next sweep drops it
    q.admit("PLAINTEXT", "10.9.9.9", "p", now=T0 + IP_BUCKET_SWEEP_S + 1)
    assert q.ip_bucket_count() == 1
    # ... but one still paying back a burst (0.5 s ago, at 10/s) is kept
    sweep = T0 + 2 * IP_BUCKET_SWEEP_S + 1
    admit_burst(q, "10.0.0.1", 10, sweep - 0.5)
    q.admit("PLAINTEXT", "10.9.9.8", "p", now=sweep)
    assert q.ip_bucket_count() == 2  # 10.0.0.1's and 10.9.9.8's new one; 10.9.9.9's went


def test_throttles_are_logged_at_a_bounded_rate(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "kafkalite.broker.connection_quotas")
    q = quotas()
    q.update_ip_quotas({"10.0.0.1": 1})
    admit_burst(q, "10.0.0.1", 50, T0)
    lines = [r.getMessage() for r in caplog.records if "connection creation rate" in r.getMessage()]
    assert len(lines) == 1
    assert "10.0.0.1" in lines[0] and "quota of 1/s" in lines[0]


def test_refusal_log_forgets_quiet_reasons() -> None:
    log = RefusalLog(interval_s=0.0)
    for i in range(REFUSAL_LOG_MAX_KEYS * 3):
        log.warn(f"ip:{i}", "refused %s", i)
    assert len(log._last) <= REFUSAL_LOG_MAX_KEYS


def test_client_quotas_hand_ip_entities_to_the_connection_quotas(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = LocalMetadataStore(tmp_path)
        store.load()
        cq = ClientQuotas(store)
        q = quotas()
        cq.on_ip_quotas = q.update_ip_quotas
        await cq.load()
        await cq.alter(QuotaEntity(ip="10.0.0.1"), {RATE: 5.0}, ())
        await cq.alter(QuotaEntity(ip=D), {RATE: 9.0}, ())
        assert q.ip_rates == {"10.0.0.1": 5.0} and q.ip_default_rate == 9.0
        assert not cq.active  # ip entities never cost a request anything
        assert cq.ip_quotas() == {"10.0.0.1": 5.0, D: 9.0}
        # a restarted broker loads them back from the store
        store2 = LocalMetadataStore(tmp_path)
        store2.load()
        cq2, q2 = ClientQuotas(store2), quotas()
        cq2.on_ip_quotas = q2.update_ip_quotas
        await cq2.load()
        assert q2.ip_rates == {"10.0.0.1": 5.0} and q2.ip_default_rate == 9.0
        # another broker's change (a /config/changes notification) reloads the entity
        store.alter_client_quotas(QuotaEntity(ip="10.0.0.1"), {}, {RATE})
        cq2.store = store
        await cq2.reload([QuotaEntity(ip="10.0.0.1")])
        assert q2.ip_rates == {} and q2.ip_rate("10.0.0.1") == 9.0

    asyncio.run(scenario())
