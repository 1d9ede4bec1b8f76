"""BrokerStats: the broker's running counters — per topic messages and bytes in and out, per API request
counts and latency histograms, ISR changes — plain integers bumped per batch, read by kafkalite.web.metrics.
"""

from __future__ import annotations

from kafkalite.storage.latency import LatencyHistogram

MAX_API_KEY = 256  # request counters are kept for API keys below this


class TopicStats:
    """Kafka's BrokerTopicMetrics of one topic (counts since the broker started)."""

    __slots__ = (
        "messages_in",
        "bytes_in",
        "bytes_out",
        "replication_bytes_out",
        "produce_requests",
        "fetch_requests",
        "failed_produce_requests",
        "failed_fetch_requests",
    )

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.replication_bytes_out = 0
        self.produce_requests = 0  # one per partition of a Produce request, as Kafka counts
        self.fetch_requests = 0  # one per partition of a Fetch request
        self.failed_produce_requests = 0
        self.failed_fetch_requests = 0

    def add(self, other: TopicStats) -> None:
        for name in TopicStats.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class RequestStats:
    """Kafka's RequestMetrics of one API: how many requests, and where their time went."""

    __slots__ = ("requests", "total", "queue", "local", "remote", "send")

    def __init__(self) -> None:
        self.requests = 0
        self.total = LatencyHistogram()  # frame read .. answer handed to the socket
        self.queue = LatencyHistogram()  # frame read .. handler start (pipelined requests wait)
        self.local = LatencyHistogram()  # handler time, purgatory waits excluded
        self.remote = LatencyHistogram()  # purgatory: long-poll fetch, acks=all waiting for the ISR
        self.send = LatencyHistogram()  # writing the answer (sendfile of fetched regions included)


class FilterCounters:
    """Filtered fetches (issue 35): bytes scanned against bytes sent, batches judged from headers."""

    __slots__ = (
        "batches_decoded",
        "batches_dropped",
        "batches_kept",
        "bytes_scanned",
        "bytes_sent",
    )

    def __init__(self) -> None:
        self.bytes_scanned = 0
        self.bytes_sent = 0
        self.batches_kept = 0  # sent unchanged: judged ALL from the header, or every record matched
        self.batches_dropped = 0
        self.batches_decoded = 0


class BrokerStats:
    """Everything the broker counts for its metrics; the hot paths update these without locks."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        # counts of topics deleted since the start, so the all-topics sums never go down
        self.deleted_topics = TopicStats()
        self.requests: dict[int, RequestStats] = {}  # by API key
        self.isr_shrinks = 0
        self.isr_expands = 0
        # KIP-392, per partition: consumer fetches this broker answered from its own replica (leader
        # or follower), and those it answered with a preferred read replica elsewhere instead
        self.consumer_fetches: dict[tuple[str, int], int] = {}
        self.preferred_replica_redirects: dict[tuple[str, int], int] = {}
        self.fetch_filter = FilterCounters()

    def topic(self, name: str) -> TopicStats:
        """The counters of `name`, created on first use (call only for topics that exist)."""
        ts = self.topics.get(name)
        if ts is None:
            ts = self.topics[name] = TopicStats()
        return ts

    def failed_produce(self, name: str) -> None:
        ts = self.topic(name)
        ts.produce_requests += 1
        ts.failed_produce_requests += 1

    def failed_fetch(self, name: str) -> None:
        ts = self.topic(name)
        ts.fetch_requests += 1
        ts.failed_fetch_requests += 1

    def forget_topic(self, name: str) -> None:
        """The topic was deleted: its series go away, its counts stay in the all-topics sums."""
        ts = self.topics.pop(name, None)
        if ts is not None:
            self.deleted_topics.add(ts)
        for counts in (self.consumer_fetches, self.preferred_replica_redirects):
            for key in [k for k in counts if k[0] == name]:
                del counts[key]

    def all_topics(self) -> TopicStats:
        out = TopicStats()
        out.add(self.deleted_topics)
        for ts in self.topics.values():
            out.add(ts)
        return out

    def request(self, api_key: int) -> RequestStats:
        rs = self.requests.get(api_key)
        if rs is None:
            rs = self.requests[api_key] = RequestStats()
        return rs

    def record_request(
        self, api_key: int, arrived_ns: int, started_ns: int, handled_ns: int, parked_ns: int,
        done_ns: int, sent_ns: int,
    ) -> None:  # fmt: skip
        """One answered request: read at `arrived_ns`, handler from `started_ns` to `handled_ns`
        (of which `parked_ns` waiting in purgatory), answer ready at `done_ns` and written by `sent_ns`."""
        rs = self.requests.get(api_key)
        if rs is None:
            if not 0 <= api_key < MAX_API_KEY:
                return  # not a Kafka request (a SASL v0 token frame)
            rs = self.request(api_key)
        rs.requests += 1
        rs.total.observe_ns(sent_ns - arrived_ns)
        rs.queue.observe_ns(started_ns - arrived_ns)
        rs.local.observe_ns(handled_ns - started_ns - parked_ns)
        rs.remote.observe_ns(parked_ns + done_ns - handled_ns)
        rs.send.observe_ns(sent_ns - done_ns)
