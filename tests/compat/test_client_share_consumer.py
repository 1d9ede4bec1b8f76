"""kafkalite's ShareConsumer (KIP-932) against an embedded broker: records shared once between members,
implicit and explicit acknowledgement, RELEASE redelivery, REJECT to the dead-letter topic, commit_sync,
leaving the group on close, and a confluent-kafka ShareConsumer in the same group.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from share_support import consumer as confluent_share_consumer
from share_support import new_topic, produce, set_group_configs

from kafkalite.cli.wire import WireClient
from kafkalite.client import AcknowledgeType, ShareConsumer, ShareConsumerRecord
from kafkalite.client.errors import IllegalStateError
from kafkalite.protocol.schema import APIS
from kafkalite.testing import Broker

pytestmark = pytest.mark.compat

CONFIG = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "5000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "200",
}
EARLIEST = {"share.auto.offset.reset": "earliest"}
DESCRIBE = APIS[77].request


@pytest.fixture(scope="module")
def bs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with Broker(tmp_path_factory.mktemp("sharecli"), config=CONFIG) as b:
        yield b.bootstrap_servers


@pytest.fixture
def setup(bs: str, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    made: list[ShareConsumer] = []

    def make(group: str, explicit: bool = False, **extra: Any) -> ShareConsumer:
        c = ShareConsumer(
            bootstrap_servers=bs,
            group_id=group,
            share_acknowledgement_mode="explicit" if explicit else "implicit",
            fetch_max_wait_ms=200,
            **extra,
        )
        made.append(c)
        return c

    yield make
    for c in made:
        c.close(timeout=10)


def _group(bs: str, name: str, **configs: str) -> str:
    set_group_configs(bs, name, {**EARLIEST, **configs})
    return name


def _poll_until(
    c: ShareConsumer, done: Callable[[list[ShareConsumerRecord]], bool], timeout: float = 30
) -> list[ShareConsumerRecord]:
    got: list[ShareConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while not done(got):
        assert time.monotonic() < deadline, f"timed out; got {[r.offset for r in got]}"
        for recs in c.poll(300).values():
            got.extend(recs)
    return got


def _produce_batches(bs: str, topic: str, n: int, per_batch: int = 10) -> None:
    """n records in batches of per_batch: a share fetch acquires whole batches, so several
    batches are what lets members share one partition."""
    for start in range(0, n, per_batch):
        produce(bs, topic, per_batch, start=start)


def _members(bs: str, group: str) -> list[str]:
    with WireClient(bs, timeout=15) as w:
        d = w.send(DESCRIBE(group_ids=[group], include_authorized_operations=False), version=1)
    return sorted(m.member_id for m in d.groups[0].members)


def _wait(cond: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_two_kafkalite_members_share_records_once(bs: str, setup: Any) -> None:
    topic, n = new_topic(bs), 200
    group = _group(bs, "kl-two")
    a, b = setup(group, max_poll_records=10), setup(group, max_poll_records=10)
    a.subscribe([topic])
    b.subscribe([topic])
    _wait(lambda: bool(a.assignment()) and bool(b.assignment()), "both members assigned")
    _produce_batches(bs, topic, n)
    seen: dict[str, list[int]] = {"a": [], "b": []}
    deadline = time.monotonic() + 30
    while len(seen["a"]) + len(seen["b"]) < n:
        assert time.monotonic() < deadline
        for name, c in (("a", a), ("b", b)):
            for recs in c.poll(100).values():
                seen[name].extend(r.offset for r in recs)
                assert {r.delivery_count for r in recs} == {1}
    everything = seen["a"] + seen["b"]
    assert sorted(everything) == list(range(n))  # none twice, none missing
    assert seen["a"] and seen["b"]


def test_implicit_acknowledgement_accepts_on_the_next_poll_and_commit(bs: str, setup: Any) -> None:
    topic = new_topic(bs)
    group = _group(bs, "kl-implicit")
    produce(bs, topic, 5)
    c = setup(group)
    c.subscribe([topic])
    first = _poll_until(c, lambda got: len(got) >= 5)
    assert [r.offset for r in first] == [0, 1, 2, 3, 4]
    assert first[0].key == b"k0" and first[0].value == b"v0"
    with pytest.raises(IllegalStateError):
        c.acknowledge(first[0], AcknowledgeType.RELEASE)  # only in explicit mode
    # the next poll accepts them: a record produced now is what comes next, never 0..4 again
    produce(bs, topic, 1, start=5)
    after = _poll_until(c, lambda got: bool(got))
    assert [r.offset for r in after] == [5]
    result = c.commit_sync()  # accepts offset 5
    assert list(result.values()) == [None]
    produce(bs, topic, 1, start=6)
    c.close()
    other = setup(group)
    other.subscribe([topic])
    assert [r.offset for r in _poll_until(other, lambda got: bool(got))] == [6]


def test_explicit_release_redelivers_and_unacknowledged_records_block_poll(
    bs: str, setup: Any
) -> None:
    topic = new_topic(bs)
    group = _group(bs, "kl-release")
    produce(bs, topic, 3)
    c = setup(group, explicit=True)
    c.subscribe([topic])
    got = _poll_until(c, lambda got: len(got) >= 3)
    assert [(r.offset, r.delivery_count) for r in got] == [(0, 1), (1, 1), (2, 1)]
    c.acknowledge(got[0], AcknowledgeType.ACCEPT)
    c.acknowledge(got[1], AcknowledgeType.RELEASE)
    with pytest.raises(IllegalStateError, match="not acknowledged"):
        c.poll(0)
    c.acknowledge(got[2])  # ACCEPT by default
    with pytest.raises(IllegalStateError):
        c.acknowledge(got[2])  # twice
    again = _poll_until(c, lambda got: bool(got))
    assert [(r.offset, r.delivery_count, r.value) for r in again] == [(1, 2, b"v1")]
    c.acknowledge(again[0], AcknowledgeType.ACCEPT)
    assert set(c.commit_sync().values()) == {None}


def test_reject_archives_to_the_dead_letter_topic(bs: str, setup: Any) -> None:
    topic = new_topic(bs)
    dlq = topic + "-dlq"
    group = _group(bs, "kl-reject", **{"errors.deadletterqueue.topic.name": dlq})
    produce(bs, topic, 2)
    c = setup(group, explicit=True)
    c.subscribe([topic])
    got = _poll_until(c, lambda got: len(got) >= 2)
    c.acknowledge(got[0], AcknowledgeType.REJECT)
    c.acknowledge(got[1], AcknowledgeType.ACCEPT)
    c.commit_async().result(30)
    # rejected is archived: it never comes back; the next record is a new one
    produce(bs, topic, 1, start=2)
    nxt = _poll_until(c, lambda got: bool(got))
    assert [(r.offset, r.delivery_count) for r in nxt] == [(2, 1)]
    c.acknowledge(nxt[0])
    reader = Consumer({"bootstrap.servers": bs, "group.id": "kl-dlq-reader"})
    try:
        reader.assign([TopicPartition(dlq, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        letter = None
        while letter is None:
            assert time.monotonic() < deadline, "no dead letter"
            m = reader.poll(0.5)
            if m is not None and m.error() is None:
                letter = m
    finally:
        reader.close()
    heads = dict(letter.headers() or [])
    assert letter.value() == b"v0"
    assert heads["__dlq.errors.reason"] == b"REJECTED"
    assert heads["__dlq.errors.offset"] == b"0"
    assert heads["__dlq.errors.group.id"] == group.encode()


def test_close_leaves_the_group_and_releases_what_it_held(bs: str, setup: Any) -> None:
    topic = new_topic(bs)
    group = _group(bs, "kl-close")
    produce(bs, topic, 4)
    a = setup(group, explicit=True)
    a.subscribe([topic])
    held = _poll_until(a, lambda got: len(got) >= 4)
    a.acknowledge(held[0], AcknowledgeType.ACCEPT)  # the rest is held, not acknowledged
    assert _members(bs, group) == [a.member_id]
    a.close()
    assert _members(bs, group) == []  # gone at once, not after the session timeout
    b = setup(group)
    b.subscribe([topic])
    # released at close, long before their 5 s acquisition lock would have run out
    again = _poll_until(b, lambda got: len(got) >= 3, timeout=4)
    assert [(r.offset, r.delivery_count) for r in again] == [(1, 2), (2, 2), (3, 2)]


def test_confluent_and_kafkalite_members_share_a_group(bs: str, setup: Any) -> None:
    topic, n = new_topic(bs), 300
    group = _group(bs, "kl-interop")
    mine = setup(group, explicit=True, max_poll_records=10)
    mine.subscribe([topic])
    theirs = confluent_share_consumer(bs, group, **{"max.poll.records": 10})
    theirs.subscribe([topic])
    deliveries: list[tuple[str, int]] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def run_theirs() -> None:
        try:
            while not stop.is_set():
                msgs = [m for m in theirs.poll(0.2) if m.error() is None]
                for m in msgs:
                    with lock:
                        deliveries.append(("confluent", m.offset()))
                    theirs.acknowledge(m, AcknowledgeType.ACCEPT.value)
                if msgs:
                    theirs.commit_sync(30)
        except BaseException as exc:
            errors.append(exc)
        finally:
            theirs.close()

    t = threading.Thread(target=run_theirs)
    t.start()
    try:
        _wait(lambda: len(_members(bs, group)) == 2, "both members in the group")
        # produced from a thread, so that both members poll while records arrive
        producer = threading.Thread(target=_produce_batches, args=(bs, topic, n))
        producer.start()
        deadline = time.monotonic() + 40
        while True:
            with lock:
                if len(deliveries) >= n:
                    break
            assert time.monotonic() < deadline, "timed out"
            assert not errors, errors
            for recs in mine.poll(100).values():
                for r in recs:
                    with lock:
                        deliveries.append(("kafkalite", r.offset))
                    mine.acknowledge(r, AcknowledgeType.ACCEPT)
            mine.commit_sync()
        producer.join(30)
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors
    offsets = sorted(o for _who, o in deliveries)
    assert offsets == list(range(n))  # none delivered twice
    assert {who for who, _o in deliveries} == {"confluent", "kafkalite"}


def test_bad_configuration_is_a_clear_error(bs: str) -> None:
    with pytest.raises(ValueError, match=r"group\.id"):
        ShareConsumer(bootstrap_servers=bs)
    with pytest.raises(ValueError, match=r"share\.acknowledgement\.mode"):
        ShareConsumer(bootstrap_servers=bs, group_id="g", share_acknowledgement_mode="sometimes")


def test_polling_before_subscribe_is_an_error(setup: Any) -> None:
    with pytest.raises(IllegalStateError, match="not subscribed"):
        setup("kl-nosub").poll(0)


def test_close_in_implicit_mode_accepts_the_last_poll(bs: str, setup: Any) -> None:
    topic = new_topic(bs)
    group = _group(bs, "kl-close-implicit")
    produce(bs, topic, 3)
    c = setup(group)
    c.subscribe([topic])
    assert len(_poll_until(c, lambda got: len(got) >= 3)) == 3
    c.close()  # no poll or commit after the delivery: close accepts them
    produce(bs, topic, 1, start=3)
    other = setup(group)
    other.subscribe([topic])
    assert [(r.offset, r.delivery_count) for r in _poll_until(other, bool)] == [(3, 1)]


def test_a_filter_delivers_only_matching_records_and_archives_the_rest(bs: str, setup: Any) -> None:
    """filter= rides on ShareFetch: the broker delivers k1 and k3 only; the others are archived, so a
    member of the same group without a filter finds nothing left of these five."""
    topic = new_topic(bs)
    group = _group(bs, "kl-filter")
    produce(bs, topic, 5)
    c = setup(group, filter="key IN ('k1', 'k3')")
    c.subscribe([topic])
    got = _poll_until(c, lambda got: len(got) >= 2)
    assert [(r.offset, r.key) for r in got] == [(1, b"k1"), (3, b"k3")]
    c.commit_sync()
    c.close()
    produce(bs, topic, 1, start=5)
    other = setup(group)
    other.subscribe([topic])
    assert [r.offset for r in _poll_until(other, lambda got: bool(got))] == [5]
