"""Prometheus metrics at GET /metrics, named as the Prometheus JMX exporter's usual Kafka rules name Kafka's
MBeans; a Collector reads the broker's plain counters (broker.stats) and state only at scrape time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

import kafkalite.protocol.messages  # noqa: F401  (registers every API in APIS)
from kafkalite.cluster.controller.states import PartitionState
from kafkalite.protocol.schema import APIS
from kafkalite.storage.latency import LatencyHistogram
from kafkalite.web.exposition import FamilySink, Labels, MetricSink, Row, TextSink

if TYPE_CHECKING:
    from kafkalite.broker.server import BrokerServer

LOOP_PROBE_INTERVAL_S = 0.25

# (metric suffix, TopicStats field, help) of kafka.server:type=BrokerTopicMetrics
_TOPIC_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("messagesin", "messages_in", "Records appended by this broker as partition leader."),
    ("bytesin", "bytes_in", "Bytes of record batches appended from producers."),
    ("bytesout", "bytes_out", "Bytes of record batches sent to consumers."),
    ("replicationbytesout", "replication_bytes_out", "Bytes of record batches sent to followers."),
    ("totalproducerequests", "produce_requests", "Produce requests, counted per partition."),
    ("totalfetchrequests", "fetch_requests", "Fetch requests, counted per partition."),
    ("failedproducerequests", "failed_produce_requests", "Partitions whose produce failed."),
    ("failedfetchrequests", "failed_fetch_requests", "Partitions whose fetch read failed."),
)

# (metric suffix, RequestStats field, help) of kafka.network:type=RequestMetrics
_REQUEST_TIMES: tuple[tuple[str, str, str], ...] = (
    ("totaltimems", "total", "From the request read to its answer written, ms."),
    ("requestqueuetimems", "queue", "Waiting behind earlier requests of the connection, ms."),
    ("localtimems", "local", "In the request's handler (purgatory waits excluded), ms."),
    ("remotetimems", "remote", "Parked in purgatory: long-poll fetch, acks=all, ms."),
    ("responsesendtimems", "send", "Writing the answer to the socket, ms."),
)


class LoopLagProbe:
    """How late the broker's event loop wakes a periodic sleep: the delay every request also sees."""

    def __init__(self, interval: float = LOOP_PROBE_INTERVAL_S) -> None:
        self.interval = interval
        self.lag = LatencyHistogram()
        self.last_ns = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag-probe")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        interval_ns = int(self.interval * 1e9)
        while True:
            before = time.monotonic_ns()
            await asyncio.sleep(self.interval)
            self.last_ns = max(time.monotonic_ns() - before - interval_ns, 0)
            self.lag.observe_ns(self.last_ns)


class BrokerCollector(Collector):
    """Every kafkalite metric of one broker, computed when Prometheus scrapes: write() puts them into a
    sink — prometheus_client families for the registry, or the text format directly for /metrics."""

    def __init__(self, broker: BrokerServer, probe: LoopLagProbe) -> None:
        self.broker = broker
        self.probe = probe
        self.text_cache: dict[tuple[str, Labels], object] = {}

    def collect(self) -> Iterator[Metric]:
        sink = FamilySink()
        self.write(sink)
        return iter(sink.families)

    def text(self) -> bytes:
        """The text format of every metric; the formatted label sets are kept for the next scrape."""
        cache = self.text_cache
        sink = TextSink(cache)
        self.write(sink)
        if (
            len(cache) > 4 * len(sink.out) + 1000
        ):  # topics, groups or APIs gone: forget their labels
            cache.clear()
        return sink.text()

    def write(self, sink: MetricSink) -> None:
        self._topic_metrics(sink)
        self._follower_fetch_metrics(sink)
        self._request_metrics(sink)
        self._log_metrics(sink)
        self._replica_metrics(sink)
        self._controller_metrics(sink)
        self._group_metrics(sink)
        self._remote_log_metrics(sink)
        probe = self.probe
        sink.histogram(
            "kafkalite_eventloop_lagms",
            "How late the broker's event loop woke a periodic timer, ms.",
            [((), probe.lag)],
        )
        sink.gauge(
            "kafkalite_eventloop_lastlagms",
            "The event loop's lag at the last probe, ms.",
            [((), probe.last_ns / 1e6)],
        )
        # kafka.network:type=SocketServer (KIP-72); unbounded, Kafka's MemoryPool.NONE answers
        # Long.MAX_VALUE available and nothing used
        pool = self.broker.memory_pool
        sink.gauge(
            "kafka_network_socketserver_memorypoolavailable",
            "Bytes of queued.max.request.bytes not held by requests being received or queued.",
            [((), (1 << 63) - 1 if pool is None else pool.available)],
        )
        sink.gauge(
            "kafka_network_socketserver_memorypoolused",
            "Bytes held by requests being received or queued (queued.max.request.bytes' pool).",
            [((), 0 if pool is None else pool.used)],
        )
        sink.gauge(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests parked in purgatory (long-poll fetches and acks=all produces).",
            [((), len(self.broker.delayed))],
        )

    # -- kafka.server:type=BrokerTopicMetrics
    def _topic_metrics(self, sink: MetricSink) -> None:
        stats = self.broker.stats
        topics = [((("topic", name),), ts) for name, ts in sorted(stats.topics.items())]
        everything = stats.all_topics()
        for suffix, field, doc in _TOPIC_COUNTERS:
            # the JMX exporter's all-topics series: the MBean without a topic key, no topic label
            rows: list[Row] = [((), getattr(everything, field))]
            rows += [(labels, getattr(ts, field)) for labels, ts in topics]
            sink.counter(
                f"kafka_server_brokertopicmetrics_{suffix}",
                doc + " Without a topic label: all topics.",
                rows,
            )

    # -- KIP-392: consumer fetches per partition, read here or sent to a preferred read replica
    def _follower_fetch_metrics(self, sink: MetricSink) -> None:
        stats = self.broker.stats
        for name, counts, doc in (
            (
                "consumerfetchrequests",
                stats.consumer_fetches,
                "Consumer fetches of the partition answered from this broker's replica (leader or "
                "follower), counted per partition of a Fetch request.",
            ),
            (
                "preferredreadreplicaredirects",
                stats.preferred_replica_redirects,
                "Consumer fetches of the partition this leader answered with a preferred read "
                "replica on another broker (KIP-392) instead of records.",
            ),
        ):
            sink.counter(
                f"kafkalite_partition_{name}",
                doc,
                [
                    ((("topic", t), ("partition", str(p))), n)
                    for (t, p), n in sorted(counts.items())
                ],
            )

    # -- kafka.network:type=RequestMetrics
    def _request_metrics(self, sink: MetricSink) -> None:
        rows = sorted(
            (
                ((("request", _api_name(key)),), rs)
                for key, rs in self.broker.stats.requests.items()
            ),
            key=lambda row: row[0],
        )
        sink.counter(
            "kafka_network_requestmetrics_requests",
            "Requests answered.",
            [(labels, rs.requests) for labels, rs in rows],
        )
        for suffix, field, doc in _REQUEST_TIMES:
            sink.histogram(
                f"kafka_network_requestmetrics_{suffix}",
                doc,
                [(labels, getattr(rs, field)) for labels, rs in rows],
            )

    # -- kafka.log:type=Log and LogFlushStats
    def _log_metrics(self, sink: MetricSink) -> None:
        rows = [
            ((("topic", p.topic), ("partition", str(p.partition))), p)
            for p in sorted(self.broker.replica_manager.partitions(), key=lambda p: p.key)
        ]
        sink.gauge(
            "kafka_log_log_size",
            "Bytes of the partition's log.",
            [(labels, lg.size_in_bytes) for labels, lg in rows],
        )
        sink.gauge(
            "kafka_log_log_numlogsegments",
            "Segments of the partition's log.",
            [(labels, lg.num_segments) for labels, lg in rows],
        )
        sink.gauge(
            "kafka_log_log_logstartoffset",
            "The log start offset.",
            [(labels, lg.log_start_offset) for labels, lg in rows],
        )
        sink.gauge(
            "kafka_log_log_logendoffset",
            "The log end offset.",
            [(labels, lg.log_end_offset) for labels, lg in rows],
        )
        sink.histogram(
            "kafka_log_logflushstats_logflushrateandtimems",
            "Log flushes (fsync of segments and indexes) and how long they took, ms.",
            [((), self.broker.log_manager.flush_times)],
        )

    # -- KIP-405 / KIP-963: the remote tier (kafka.server:type=BrokerTopicMetrics, broker-wide here)
    def _remote_log_metrics(self, sink: MetricSink) -> None:
        rlm = self.broker.remote_log_manager
        if rlm is None:
            return
        st = rlm.stats
        for suffix, value, doc in (
            (
                "remotecopybytes",
                st.remote_copy_bytes,
                "Bytes of segments copied to the remote tier.",
            ),
            ("remotecopyrequests", st.remote_copy_requests, "Segments copied to the remote tier."),
            ("failedremotecopyrequests", st.remote_copy_errors, "Segment copies that failed."),
            ("remotefetchbytes", st.remote_fetch_bytes, "Bytes read from the remote tier."),
            ("remotefetchrequests", st.remote_fetch_requests, "Reads from the remote tier."),
            ("failedremotefetchrequests", st.remote_fetch_errors, "Remote reads that failed."),
            ("remotedeleterequests", st.remote_delete_requests, "Remote segments deleted."),
            (
                "failedremotedeleterequests",
                st.remote_delete_errors,
                "Remote deletions that failed.",
            ),
        ):
            sink.counter(f"kafka_server_brokertopicmetrics_{suffix}", doc, [((), value)])
        sink.counter(
            "kafka_server_delayedremotefetchmetrics_expires",
            "Fetches whose remote read passed remote.fetch.max.wait.ms (answered empty).",
            [((), st.remote_fetch_expires)],
        )
        sizes: dict[str, int] = {}
        lag: dict[str, int] = {}
        for topic, partition in rlm.cache.partitions():
            sizes[topic] = sizes.get(topic, 0) + rlm.remote_size(topic, partition)
        for (topic, _p), n in st.copy_lag.items():
            lag[topic] = lag.get(topic, 0) + n
        sink.gauge(
            "kafka_server_brokertopicmetrics_remotelogsizebytes",
            "Bytes of the topic's segments in the remote tier.",
            [((("topic", t),), v) for t, v in sorted(sizes.items())],
        )
        sink.gauge(
            "kafka_server_brokertopicmetrics_remotecopylagsegments",
            "Rolled segments below the last stable offset not copied yet (at the last round).",
            [((("topic", t),), v) for t, v in sorted(lag.items())],
        )

    # -- kafka.server:type=ReplicaManager
    def _replica_metrics(self, sink: MetricSink) -> None:
        partitions = self.broker.replica_manager.partitions()
        leaders = [p for p in partitions if p.is_leader]
        under = sum(1 for p in leaders if len(p.isr) < len(p.replicas))
        under_min = sum(1 for p in leaders if len(p.isr) < p.config.min_insync_replicas)
        offline = sum(1 for p in partitions if p.closed)
        stats = self.broker.stats
        prefix = "kafka_server_replicamanager_"
        sink.gauge(prefix + "partitioncount", "Partitions hosted.", [((), len(partitions))])
        sink.gauge(prefix + "leadercount", "Partitions led.", [((), len(leaders))])
        sink.gauge(
            prefix + "underreplicatedpartitions",
            "Led partitions whose ISR lacks replicas.",
            [((), under)],
        )
        sink.gauge(
            prefix + "underminisrpartitioncount",
            "Led partitions whose ISR is below min.insync.replicas.",
            [((), under_min)],
        )
        sink.gauge(prefix + "offlinereplicacount", "Replicas not served.", [((), offline)])
        sink.counter(prefix + "isrshrinks", "ISR shrinks accepted.", [((), stats.isr_shrinks)])
        sink.counter(prefix + "isrexpands", "ISR expands accepted.", [((), stats.isr_expands)])
        # kafkalite's fetch filter (issue 35): what filtered fetches read, and what they sent
        ff = stats.fetch_filter
        for name, help_text, value in (
            ("bytes_scanned", "Bytes read by filtered fetches.", ff.bytes_scanned),
            ("bytes_sent", "Bytes filtered fetches sent.", ff.bytes_sent),
            ("batches_kept", "Batches sent unchanged by filtered fetches.", ff.batches_kept),
            ("batches_dropped", "Batches left out by filtered fetches.", ff.batches_dropped),
            ("batches_decoded", "Batches decoded to test records.", ff.batches_decoded),
        ):
            sink.counter(f"kafkalite_fetch_filter_{name}", help_text, [((), value)])
        # kafka.server:type=LeaderReplication / FollowerReplication, attribute byte-rate (KIP-73)
        now_ms = int(time.monotonic() * 1000)
        for quota in (
            self.broker.replication_quotas.leader,
            self.broker.replication_quotas.follower,
        ):
            sink.gauge(
                f"kafka_server_{quota.kind.lower()}_byte_rate",
                f"Bytes/s of throttled replicas' replication ({quota.kind}), measured against "
                "the replication throttle.",
                [((), quota.byte_rate(now_ms))],
            )

    # -- kafka.controller:type=KafkaController
    def _controller_metrics(self, sink: MetricSink) -> None:
        zk = self.broker.zk_broker
        if zk is None:  # one node: it is its own controller and every partition has its leader
            active, offline = 1, 0
        else:
            controller = zk.controller
            active = 1 if controller is not None and controller.active else 0
            offline = 0
            if controller is not None and active:
                offline = sum(
                    1
                    for s in controller.machine.partition_states.values()
                    if s is PartitionState.OFFLINE
                )
        prefix = "kafka_controller_kafkacontroller_"
        sink.gauge(prefix + "activecontrollercount", "1 on the active controller.", [((), active)])
        sink.gauge(
            prefix + "offlinepartitionscount",
            "Partitions without a leader (reported by the active controller).",
            [((), offline)],
        )

    # -- kafka.coordinator.group:type=GroupMetadataManager, and consumer-group lag
    def _group_metrics(self, sink: MetricSink) -> None:
        counts: dict[tuple[str, str], int] = {}
        lag: list[Row] = []
        coordinator = self.broker.groups.coordinator
        if coordinator is not None:
            rm = self.broker.replica_manager
            for gid, g in sorted(coordinator.groups.items()):
                if not coordinator.is_coordinator_for(gid) or coordinator.is_loading(gid):
                    continue
                if g.consumer is not None:
                    kind, state = "consumer", g.consumer.state
                else:
                    kind, state = "classic", str(g.state)
                if state == "Dead":
                    continue
                counts[(kind, state)] = counts.get((kind, state), 0) + 1
                for tp, om in sorted(g.offsets.items()):
                    p = rm.get_partition(tp.topic, tp.partition)
                    if p is None or om.offset < 0:
                        continue
                    labels = (("group", gid), ("topic", tp.topic), ("partition", str(tp.partition)))
                    lag.append((labels, max(p.high_watermark - om.offset, 0)))
            for gid, sg in coordinator.share_groups.items():
                if coordinator.is_coordinator_for(gid):
                    counts[("share", sg.state)] = counts.get(("share", sg.state), 0) + 1
        sink.gauge(
            "kafka_coordinator_group_groupmetadatamanager_numgroups",
            "Groups this broker coordinates, by type (classic, consumer, share) and state.",
            [
                ((("type", kind), ("state", state)), n)
                for (kind, state), n in sorted(counts.items())
            ],
        )
        rebalances: list[Row] = []
        if coordinator is not None:
            rebalances = [((("type", k),), n) for k, n in sorted(coordinator.rebalances.items())]
        sink.counter(
            "kafka_coordinator_group_groupmetadatamanager_rebalances",
            "Rebalances started here: new classic generations, consumer group-epoch bumps.",
            rebalances,
        )
        sink.gauge(
            "kafka_consumergroup_lag",
            "High watermark minus committed offset, on the group's coordinator, for partitions with a "
            "replica here (a follower's high watermark is the leader's as of its last fetch).",
            lag,
        )


def _api_name(key: int) -> str:
    api = APIS.get(key)
    return api.name if api is not None else str(key)


REGISTRY_KEY: web.AppKey[CollectorRegistry] = web.AppKey("metrics_registry", CollectorRegistry)
PROBE_KEY: web.AppKey[LoopLagProbe] = web.AppKey("loop_lag_probe", LoopLagProbe)
COLLECTOR_KEY: web.AppKey[BrokerCollector] = web.AppKey("metrics_collector", BrokerCollector)


async def metrics(request: web.Request) -> web.Response:
    """GET /metrics: the Prometheus text format, written in the broker's event loop straight from its
    counters (a millisecond or two for a few hundred partitions; no worker thread, no GIL hand-offs)."""
    body = request.app[COLLECTOR_KEY].text()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})


def setup(app: web.Application) -> None:
    """Add the /metrics route, a registry of this broker's own (not the process-wide default one)
    and the event-loop lag probe, which runs while the HTTP listener does."""
    from kafkalite.web.server import BROKER_KEY

    broker: BrokerServer = app[BROKER_KEY]
    probe = LoopLagProbe()
    collector = BrokerCollector(broker, probe)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    app[REGISTRY_KEY] = registry
    app[COLLECTOR_KEY] = collector
    app[PROBE_KEY] = probe

    async def run_probe(_app: web.Application) -> AsyncIterator[None]:
        probe.start()
        yield
        await probe.stop()

    app.cleanup_ctx.append(run_probe)
    app.router.add_get("/metrics", metrics)
