"""Options honoured or refused through Spark: maxRecordsPerPartition makes more tasks, save mode overwrite is
refused, groupIdPrefix / kafka.group.id receive each finished micro-batch's offsets (for lag monitoring)."""

from __future__ import annotations

import pytest
from spark_support import produce

from kafkalite.client import KafkaAdminClient, TopicPartition

pytestmark = pytest.mark.spark


def test_max_records_per_partition_and_save_mode_overwrite(spark, broker, topic):
    broker.create_topic(topic, 2)
    produce(broker, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(100)])
    df = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("maxRecordsPerPartition", "20")
        .load()
    )
    assert df.rdd.getNumPartitions() == 6  # 50 offsets per partition -> 3 pieces each
    assert sorted(r.offset for r in df.select("offset").collect()) == sorted(list(range(50)) * 2)
    with pytest.raises(Exception, match=r"Save mode Overwrite is not allowed"):
        (
            df.select("value")
            .write.format("kafkalite")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("topic", topic)
            .mode("overwrite")
            .save()
        )


def test_group_ids_receive_the_finished_batches_offsets(spark, broker, topic, tmp_path):
    broker.create_topic(topic, 2)
    produce(broker, topic, [{"value": b"x", "partition": i % 2} for i in range(30)])
    fixed = f"{topic}-fixed"
    for name, option, value in (
        ("prefix", "groupIdPrefix", f"{topic}-dash"),
        ("fixed", "kafka.group.id", fixed),
    ):
        query = (
            spark.readStream.format("kafkalite")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option(option, value)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120) and query.exception() is None
    with KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        groups = [g for g, _, _ in admin.list_groups() if g.startswith(topic)]
        assert len(groups) == 2 and fixed in groups
        assert any(g.startswith(f"{topic}-dash-") for g in groups)
        for group in groups:
            committed = admin.list_consumer_group_offsets(group)
            assert {tp: om.offset for tp, om in committed.items()} == {
                TopicPartition(topic, 0): 15,
                TopicPartition(topic, 1): 15,
            }
