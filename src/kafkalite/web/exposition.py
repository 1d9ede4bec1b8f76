"""Two renderings of one set of metric samples: prometheus_client families (the registry's model) and the
text format 0.0.4 written directly with label sets cached across scrapes, held byte-equal by a test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from kafkalite.storage.latency import BOUNDS_MS, LatencyHistogram

Labels = tuple[tuple[str, str], ...]  # (name, value) pairs in the order the family declares them
Row = tuple[Labels, float]

_LE: tuple[str, ...] = (*(str(float(b)) for b in BOUNDS_MS), "+Inf")


class MetricSink(Protocol):
    """Where a collector writes its families; rows may be any iterable, read once."""

    def counter(self, name: str, doc: str, rows: Iterable[Row]) -> None: ...

    def gauge(self, name: str, doc: str, rows: Iterable[Row]) -> None: ...

    def histogram(
        self, name: str, doc: str, rows: Iterable[tuple[Labels, LatencyHistogram]]
    ) -> None: ...


class FamilySink:
    """Builds prometheus_client metric families (what a CollectorRegistry's collect() yields)."""

    def __init__(self) -> None:
        self.families: list[Metric] = []

    def counter(self, name: str, doc: str, rows: Iterable[Row]) -> None:
        family = CounterMetricFamily(name, doc)
        for labels, value in rows:
            family.add_sample(name + "_total", dict(labels), value)
        self.families.append(family)

    def gauge(self, name: str, doc: str, rows: Iterable[Row]) -> None:
        family = GaugeMetricFamily(name, doc)
        for labels, value in rows:
            family.add_sample(name, dict(labels), value)
        self.families.append(family)

    def histogram(
        self, name: str, doc: str, rows: Iterable[tuple[Labels, LatencyHistogram]]
    ) -> None:
        family: HistogramMetricFamily | None = None
        for labels, h in rows:
            if family is None:
                family = HistogramMetricFamily(name, doc, labels=[k for k, _ in labels])
            family.add_metric([v for _, v in labels], h.cumulative_ms(), sum_value=h.sum_ns / 1e6)
        self.families.append(family if family is not None else HistogramMetricFamily(name, doc))


def go_float(value: float) -> str:
    """A sample value as Prometheus (Go) prints it; small integers, the common case, without float()."""
    if type(value) is int and -1_000_000_000_000_000 < value < 1_000_000:
        return f"{value}.0"
    return floatToGoString(value)  # type: ignore[no-any-return,no-untyped-call]


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _label_text(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels)) + "}"


class TextSink:
    """The text format 0.0.4, written straight from the rows. Each metric name + label set is formatted
    once and kept (`self.prefixes`, shared across scrapes); a scrape costs a dict lookup per sample."""

    def __init__(self, cache: dict[tuple[str, Labels], object] | None = None) -> None:
        self.out: list[str] = []
        self.prefixes: dict[tuple[str, Labels], object] = {} if cache is None else cache

    def text(self) -> bytes:
        return "".join(self.out).encode()

    def _header(self, name: str, mtype: str, doc: str) -> None:
        key = (name, (("#", mtype),))
        header = self.prefixes.get(key)
        if header is None:
            doc = doc.replace("\\", r"\\").replace("\n", r"\n")
            header = self.prefixes[key] = f"# HELP {name} {doc}\n# TYPE {name} {mtype}\n"
        self.out.append(header)  # type: ignore[arg-type]

    def _rows(self, name: str, rows: Iterable[Row]) -> None:
        out, prefixes = self.out, self.prefixes
        for labels, value in rows:
            key = (name, labels)
            prefix = prefixes.get(key)
            if prefix is None:
                prefix = prefixes[key] = f"{name}{_label_text(labels)} "
            out.append(prefix)  # type: ignore[arg-type]
            out.append(go_float(value))
            out.append("\n")

    def counter(self, name: str, doc: str, rows: Iterable[Row]) -> None:
        self._header(name + "_total", "counter", doc)
        self._rows(name + "_total", rows)

    def gauge(self, name: str, doc: str, rows: Iterable[Row]) -> None:
        self._header(name, "gauge", doc)
        self._rows(name, rows)

    def histogram(
        self, name: str, doc: str, rows: Iterable[tuple[Labels, LatencyHistogram]]
    ) -> None:
        self._header(name, "histogram", doc)
        out, prefixes = self.out, self.prefixes
        for labels, h in rows:
            key = (name, labels)
            cached = prefixes.get(key)
            if cached is None:
                cached = prefixes[key] = _histogram_prefixes(name, labels)
            buckets: Sequence[str] = cached  # type: ignore[assignment]
            total = 0
            for prefix, n in zip(
                buckets, h.counts, strict=False
            ):  # two more prefixes: _count, _sum
                total += n
                out.append(
                    f"{prefix}{total}.0\n" if total < 1_000_000 else prefix + go_float(total) + "\n"
                )
            out.append(buckets[-2] + go_float(total) + "\n")
            out.append(buckets[-1] + go_float(h.sum_ns / 1e6) + "\n")


def _histogram_prefixes(name: str, labels: Labels) -> tuple[str, ...]:
    """The `name_bucket{…le=…} ` prefix of every bucket, then those of `name_count` and `name_sum`."""
    buckets = tuple(f"{name}_bucket{_label_text((*labels, ('le', le)))} " for le in _LE)
    plain = _label_text(labels)
    return (*buckets, f"{name}_count{plain} ", f"{name}_sum{plain} ")
