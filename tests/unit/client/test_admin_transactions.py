"""The admin client's transaction calls against the scripted broker: describe and list transactions,
describe producers, and aborting a hanging transaction with WriteTxnMarkers to the partition leader."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_broker import FakeBroker

from kafkalite.client import KafkaAdminClient, KafkaError, KafkaProducer, TopicPartition
from kafkalite.client.admin_transactions import AbortTransactionSpec, ProducerState
from kafkalite.protocol.errors import ErrorCode


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    b = FakeBroker(transactions=True)
    yield b
    b.close()


def test_describe_and_list_transactions(fake: FakeBroker) -> None:
    with (
        KafkaProducer(bootstrap_servers=fake.bootstrap_servers, transactional_id="tx-a") as p,
        KafkaAdminClient(bootstrap_servers=fake.bootstrap_servers) as admin,
    ):
        p.init_transactions(10)
        p.begin_transaction()
        p.send("t", b"v", partition=1).get(10)
        d = admin.describe_transactions(["tx-a"])["tx-a"]
        assert (d.state, d.producer_id, d.producer_epoch) == ("Ongoing", 5000, 0)
        assert d.topic_partitions == [TopicPartition("t", 1)] and d.coordinator_id == 1
        listed = admin.list_transactions(producer_ids=[5000])
        assert [(t.transactional_id, t.producer_id) for t in listed] == [("tx-a", 5000)]
        assert admin.list_transactions(producer_ids=[1]) == []
        with pytest.raises(KafkaError):
            admin.describe_transactions(["nobody"])
        p.abort_transaction(10)


def test_describe_producers_and_abort_a_hanging_transaction(fake: FakeBroker) -> None:
    with KafkaAdminClient(bootstrap_servers=fake.bootstrap_servers) as admin:
        tp = TopicPartition("t", 0)
        found = admin.describe_producers([tp])
        assert found == {tp: [ProducerState(77, 3, 9, 1000, 2, 40)]}
        st = found[tp][0]
        admin.abort_transaction(
            AbortTransactionSpec(tp, st.producer_id, st.producer_epoch, st.coordinator_epoch)
        )
        (m,) = fake.markers
        assert (m.producer_id, m.producer_epoch, m.coordinator_epoch) == (77, 3, 2)
        assert m.transaction_result is False
        assert [(t.name, t.partition_indexes) for t in m.topics] == [("t", [0])]
        fake.api_errors = {27: [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]}
        with pytest.raises(KafkaError):
            admin.abort_transaction(AbortTransactionSpec(tp, 77, 3, 2))
