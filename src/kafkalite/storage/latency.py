"""LatencyHistogram: durations kept as plain bucket counts — one bisect and two additions per observation,
cheap enough for a hot path; a metrics exporter reads the counts at scrape time.
"""

from __future__ import annotations

from bisect import bisect_left

# bucket upper bounds in milliseconds (Prometheus `le`), and the same bounds in nanoseconds
# (few buckets: every one is a sample in each scrape, per API and per timing)
BOUNDS_MS: tuple[float, ...] = (0.25, 1, 2.5, 10, 25, 100, 250, 1000, 5000, 30000)
_BOUNDS_NS: tuple[int, ...] = tuple(int(b * 1_000_000) for b in BOUNDS_MS)


class LatencyHistogram:
    """Counts of durations per bucket (the last bucket is +Inf) and their sum; never reset."""

    __slots__ = ("counts", "sum_ns")

    def __init__(self) -> None:
        self.counts = [0] * (len(_BOUNDS_NS) + 1)
        self.sum_ns = 0

    def observe_ns(self, ns: int) -> None:
        self.counts[bisect_left(_BOUNDS_NS, ns)] += 1
        self.sum_ns += ns

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative_ms(self) -> list[tuple[str, int]]:
        """(le, cumulative count) pairs as a Prometheus histogram has them, ending with +Inf."""
        out: list[tuple[str, int]] = []
        total = 0
        for bound, n in zip((*BOUNDS_MS, float("inf")), self.counts, strict=True):
            total += n
            out.append(("+Inf" if bound == float("inf") else _le(bound), total))
        return out


def _le(bound: float) -> str:
    return str(float(bound))
