"""Quota arithmetic with a fake clock (the numbers of Kafka's own quota tests) and KIP-55 precedence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.security.quota import (
    DEFAULT_ENTITY,
    QuotaEntity,
    QuotaSensor,
    Rate,
    precedence,
    resolve_quota,
    throttle_time_ms,
)


class FakeClock:
    def __init__(self) -> None:
        self.ms = 0

    def sleep(self, ms: int) -> None:
        self.ms += ms


def test_steady_rate_then_spike() -> None:
    clock = FakeClock()
    sensor = QuotaSensor(quota=500, bound_each_window=False)
    for _ in range(10):
        assert sensor.record(400, clock.ms) == 0
        clock.sleep(1000)
    clock.sleep(500)
    # 400 * 10 + 2300 = 6300 bytes over 10.5 s = 600 B/s; (600 - 500) / 500 * 10500 ms
    assert sensor.rate.window_size_ms(clock.ms) == 10500
    assert sensor.record(2300, clock.ms) == 2100


def test_burst_at_start_is_measured_over_full_window() -> None:
    sensor = QuotaSensor(quota=100, bound_each_window=False)
    assert sensor.rate.window_size_ms(0) == 10_000  # samples - 1 windows, before any data
    assert sensor.record(1000, 0) == 0  # 1000 B over 10 s is exactly the quota
    assert sensor.record(1000, 0) == 10_000  # 200 B/s: wait one more window's worth


def test_each_window_is_bounded_too() -> None:
    # Kafka's arithmetic alone lets a new client send ten windows' worth at once (the test above);
    # the per-window bound makes it wait until the sample's own span carries the quota
    sensor = QuotaSensor(quota=100)
    assert sensor.record(50, 0) == 0
    assert sensor.record(100, 200) == 1300  # 150 B since t=0 at 100 B/s: due at 1500 ms
    assert sensor.record(100, 1500) == 0  # a new sample: one window's allowance is free
    assert sensor.record(100, 1600) == 1900  # 200 B since 1500 ms is due at 3500 ms
    # with the spike test's numbers the bound is the stricter of the two
    steady = QuotaSensor(quota=500)
    for second in range(10):
        assert steady.record(400, second * 1000) == 0
    assert steady.record(2300, 10_500) == 4600


def test_steady_producer_is_held_to_its_quota() -> None:
    """A client that sends as fast as it is allowed averages its quota over every 30 s span."""
    for size in (16_384, 65_536, 262_144):
        sensor = QuotaSensor(quota=1_048_576)
        now, sent = 0, []
        while now < 90_000:
            sent.append((now, size))
            now += 2 + sensor.record(size, now)
        for start in (0, 30_000, 60_000):
            total = sum(n for t, n in sent if start <= t < start + 30_000)
            assert total / 30 == pytest.approx(1_048_576, rel=0.03)


def test_max_throttle_time_caps() -> None:
    sensor = QuotaSensor(quota=100, max_throttle_time_ms=3000)
    assert sensor.record(5000, 0) == 3000


def test_old_samples_expire() -> None:
    rate = Rate(samples=3, window_ms=1000)
    rate.record(3000, 0)
    assert rate.measure(0) == 1500.0  # over 2 s, the minimum window
    assert rate.total(2999) == 3000
    assert rate.total(3000) == 0  # samples * window later, the sample is reset
    rate.record(10, 3000)
    assert rate.measure(3000) == 5.0


def test_samples_rotate() -> None:
    rate = Rate(samples=2, window_ms=100)
    rate.record(1, 0)
    rate.record(2, 100)
    rate.record(4, 200)  # reuses the first sample
    assert rate.total(200) == 6
    assert rate.window_size_ms(250) == 150


def test_throttle_time_formula() -> None:
    assert throttle_time_ms(600, 500, 10_500) == 2100
    assert throttle_time_ms(500, 500, 10_500) == 0
    assert throttle_time_ms(100.25, 100, 2) == 0  # 0.005 rounds half up like Java: 0
    assert throttle_time_ms(125, 100, 2) == 1  # 0.5 rounds up (Math.round), not to even
    with pytest.raises(ValueError):
        throttle_time_ms(1, 0, 1)
    with pytest.raises(ValueError):
        Rate(samples=1)


@given(observed=st.floats(1, 1e9), quota=st.floats(1, 1e9), window=st.integers(1, 100_000))
def test_throttle_solves_o_w_over_w_plus_x_equals_t(
    observed: float, quota: float, window: int
) -> None:
    x = throttle_time_ms(observed, quota, window)
    if observed <= quota:
        assert x == 0
    else:  # the exact solution of O * W / (W + X) = T, rounded to a whole millisecond
        exact = (observed - quota) / quota * window
        assert abs(x - exact) <= 0.5 + 1e-9 * exact


D = DEFAULT_ENTITY


def test_precedence_order_is_kip55() -> None:
    assert precedence("alice", "app") == [
        QuotaEntity("alice", "app"),
        QuotaEntity("alice", D),
        QuotaEntity("alice", None),
        QuotaEntity(D, "app"),
        QuotaEntity(D, D),
        QuotaEntity(D, None),
        QuotaEntity(None, "app"),
        QuotaEntity(None, D),
    ]


def test_resolution_picks_most_specific_and_tags() -> None:
    everything = {entity: float(i) for i, entity in enumerate(precedence("alice", "app"))}
    for i, entity in enumerate(precedence("alice", "app")):
        match = resolve_quota(everything, "alice", "app")
        assert match is not None and match.entity == entity and match.quota == float(i)
        del everything[entity]
    assert resolve_quota(everything, "alice", "app") is None


@pytest.mark.parametrize(
    ("configured", "user", "client", "tags"),
    [
        ({QuotaEntity("alice"): 10}, "alice", "app", ("alice", "")),
        ({QuotaEntity(D): 10}, "bob", "app", ("bob", "")),
        ({QuotaEntity(None, "app"): 10}, "bob", "app", ("", "app")),
        ({QuotaEntity(None, D): 10}, "bob", "other", ("", "other")),
        ({QuotaEntity(D, D): 10}, "bob", "other", ("bob", "other")),
        (
            {QuotaEntity("alice", D): 10, QuotaEntity(None, "app"): 5},
            "alice",
            "app",
            ("alice", "app"),
        ),
    ],
)
def test_resolution_tags(
    configured: dict[QuotaEntity, float], user: str, client: str, tags: tuple[str, str]
) -> None:
    match = resolve_quota(configured, user, client)
    assert match is not None
    assert (match.user_tag, match.client_id_tag) == tags


def test_user_quota_beats_client_quota_and_other_users_fall_back() -> None:
    quotas = {QuotaEntity("alice"): 2048.0, QuotaEntity(None, "app"): 1024.0}
    alice = resolve_quota(quotas, "alice", "app")
    bob = resolve_quota(quotas, "bob", "app")
    assert alice is not None and alice.quota == 2048.0
    assert bob is not None and bob.quota == 1024.0
    assert resolve_quota(quotas, "bob", "other") is None


def test_entity_needs_a_dimension() -> None:
    with pytest.raises(ValueError):
        QuotaEntity()
