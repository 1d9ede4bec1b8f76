"""The /metrics text written directly (web.exposition.TextSink) is byte-equal to prometheus_client's own
generate_latest over the families the registry collects, for a live broker and for awkward values.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from kafkalite.client import KafkaConsumer, KafkaProducer
from kafkalite.storage.latency import LatencyHistogram
from kafkalite.testing import Broker
from kafkalite.web.exposition import FamilySink, TextSink, go_float
from kafkalite.web.metrics import COLLECTOR_KEY
from kafkalite.web.server import listener_of


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def test_live_broker_text_equals_generate_latest(tmp_path: Path) -> None:
    config = {"http.listeners": "http://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0"}
    with Broker(tmp_path / "d", config=config) as b:
        bs = f"{b.host}:{b.port}"
        with KafkaProducer(bootstrap_servers=bs) as p:
            for i in range(30):
                p.send("expo-a" if i % 2 else "expo.b_x", value=b"v" * i).get(10)
        with KafkaConsumer(
            "expo-a", bootstrap_servers=bs, group_id='g"\\1', auto_offset_reset="earliest"
        ) as c:
            got = 0
            while got < 15:
                got += sum(len(v) for v in c.poll(timeout_ms=500).values())
            c.commit()
        listener = listener_of(b.server)
        assert listener is not None and listener._runner is not None
        collector = listener._runner.app[COLLECTOR_KEY]

        async def both() -> tuple[bytes, bytes, bytes]:
            # the same instant: families, the text twice (the second from the label cache)
            return (
                generate_latest(_Families(list(collector.collect()))),
                collector.text(),
                collector.text(),
            )

        expected, first, cached = b.call(both)
    assert b"kafka_consumergroup_lag{" in expected
    assert first == expected
    assert cached == expected


labels_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
numbers = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(labels_text, labels_text, numbers), max_size=5),
    counts=st.lists(st.integers(0, 3_000_000), min_size=11, max_size=11),
    sum_ns=st.integers(0, 10**15),
)
def test_awkward_labels_and_values_render_as_prometheus_client_does(
    rows: list[tuple[str, str, float]], counts: list[int], sum_ns: int
) -> None:
    h = LatencyHistogram()
    h.counts = counts
    h.sum_ns = sum_ns
    cache: dict[tuple[str, tuple[tuple[str, str], ...]], object] = {}
    outputs = []
    for sink in (FamilySink(), TextSink(cache), TextSink(cache)):
        sink.counter(
            "c_x",
            'doc with \\ and "quotes"\nand a newline',
            [((("zeta", a), ("alpha", b)), v) for a, b, v in rows],
        )
        sink.gauge("g_x", "gauge", [((), v) for _, _, v in rows])
        sink.histogram("h_x", "hist", [((("request", a),), h) for a, _, _ in rows[:2]])
        sink.histogram("h_empty", "no rows", [])
        if isinstance(sink, FamilySink):
            outputs.append(generate_latest(_Families(sink.families)))
        else:
            outputs.append(sink.text())
    assert outputs[1] == outputs[0]
    assert outputs[2] == outputs[0]


def test_go_float_matches_prometheus_client() -> None:
    from prometheus_client.utils import floatToGoString

    for v in (0, 1, -1, 999_999, 1_000_000, 12_345_678, -(10**15) + 1, -(10**16), 0.5, 1e6, 2.5e-7):
        assert go_float(v) == floatToGoString(v), v
