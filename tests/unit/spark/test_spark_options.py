"""Option parsing and validation of the `kafkalite` Spark format (no Spark session, no broker)."""

from __future__ import annotations

import pytest

from kafkalite.spark.offsets import (
    EARLIEST,
    LATEST,
    from_offset_dict,
    to_offset_dict,
    to_offset_json,
)
from kafkalite.spark.options import (
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def test_defaults_differ_for_batch_and_streaming():
    batch = parse_source_options(BASE, streaming=False)
    stream = parse_source_options(BASE, streaming=True)
    assert batch.starting.kind == "earliest" and batch.ending is not None
    assert batch.ending.kind == "latest"
    assert stream.starting.kind == "latest" and stream.ending is None
    assert batch.subscription.topics == ("a", "b")
    assert batch.fail_on_data_loss is True and batch.include_headers is False
    assert batch.client == {"bootstrap.servers": "127.0.0.1:9092"}


def test_option_names_are_case_insensitive():
    opts = parse_source_options(
        {**BASE, "MAXOFFSETSPERTRIGGER": "10", "includeheaders": "TRUE"}, streaming=True
    )
    assert opts.max_offsets_per_trigger == 10 and opts.include_headers is True


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"subscribePattern": "x.*"}, "Only one of"),
        ({"assign": '{"a":[0]}'}, "Only one of"),
        ({"kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
        ({"kafka.enable.auto.commit": "true"}, "never commits"),
        ({"kafka.key.deserializer": "x"}, "key.deserializer"),
        ({"kafka.value.deserializer": "x"}, "value.deserializer"),
        ({"kafka.interceptor.classes": "x"}, "interceptor"),
        ({"minPartitions": "0"}, "positive"),
        ({"maxOffsetsPerTrigger": "-5"}, "positive"),
        ({"failOnDataLoss": "maybe"}, "'true' or 'false'"),
        ({"startingOffsets": "{not json"}, "JSON"),
        ({"maxTriggerDelay": "soon"}, "duration"),
    ],
)
def test_rejected_source_options(extra, needle):
    with pytest.raises(ValueError, match=needle):
        parse_source_options({**BASE, **extra}, streaming=True)


def test_strategy_is_required_and_bootstrap_servers_too():
    with pytest.raises(ValueError, match="One of the options"):
        parse_source_options({"kafka.bootstrap.servers": "h:1"}, streaming=False)
    with pytest.raises(ValueError, match=r"kafka\.bootstrap\.servers"):
        parse_source_options({"subscribe": "a"}, streaming=False)
    with pytest.raises(ValueError, match="No topics"):
        parse_source_options({**BASE, "subscribe": " , "}, streaming=False)


def test_group_id_is_accepted():
    opts = parse_source_options({**BASE, "kafka.group.id": "g"}, streaming=True)
    assert opts.client["group.id"] == "g"


def test_batch_only_and_stream_only_rules():
    with pytest.raises(ValueError, match="can't be latest for batch"):
        parse_source_options({**BASE, "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(ValueError, match="can't be latest"):
        parse_source_options({**BASE, "startingOffsets": '{"a":{"0":-1}}'}, streaming=False)
    with pytest.raises(ValueError, match="can't be earliest"):
        parse_source_options({**BASE, "endingOffsets": '{"a":{"0":-2}}'}, streaming=False)
    with pytest.raises(ValueError, match="not valid in streaming"):
        parse_source_options({**BASE, "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(ValueError, match="not valid in streaming"):
        parse_source_options({**BASE, "endingTimestamp": "5"}, streaming=True)


def test_offset_specs_and_timestamps():
    opts = parse_source_options(
        {
            **BASE,
            "startingOffsets": '{"a":{"1":5,"0":-2}}',
            "endingOffsets": '{"a":{"0":9,"1":-1}}',
        },
        streaming=False,
    )
    assert opts.starting.offsets == {("a", 1): 5, ("a", 0): EARLIEST}
    assert opts.ending is not None and opts.ending.offsets == {("a", 0): 9, ("a", 1): LATEST}
    opts = parse_source_options(
        {**BASE, "startingTimestamp": "1000", "startingOffsetsByTimestamp": '{"a":{"0":1}}'},
        streaming=True,
    )
    assert opts.starting.kind == "timestamp" and opts.starting.timestamp == 1000  # wins
    opts = parse_source_options(
        {**BASE, "startingOffsetsByTimestamp": '{"a":{"0":7}}'}, streaming=True
    )
    assert opts.starting.kind == "timestamps" and opts.starting.offsets == {("a", 0): 7}


def test_assign_and_pattern():
    opts = parse_source_options(
        {"kafka.bootstrap.servers": "h:1", "assign": '{"b":[2,0],"a":[1]}'}, streaming=True
    )
    assert opts.subscription.assigned == (("a", 1), ("b", 0), ("b", 2))
    opts = parse_source_options(
        {"kafka.bootstrap.servers": "h:1", "subscribePattern": "ev-.*"}, streaming=True
    )
    assert opts.subscription.matches("ev-1") and not opts.subscription.matches("xev-1")
    with pytest.raises(ValueError, match="assign"):
        parse_source_options({"kafka.bootstrap.servers": "h:1", "assign": "[1]"}, streaming=True)


def test_durations():
    assert parse_duration_ms("15m", "d") == 900_000
    assert parse_duration_ms("30s", "d") == 30_000
    assert parse_duration_ms("250", "d") == 250
    assert parse_duration_ms("2h", "d") == 7_200_000


def test_sink_options():
    opts = parse_sink_options({"kafka.bootstrap.servers": "h:1", "topic": "out"})
    assert opts.topic == "out"
    with pytest.raises(ValueError, match=r"key\.serializer"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.key.serializer": "x"})
    with pytest.raises(ValueError, match=r"value\.serializer"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.value.serializer": "x"})


def test_offset_json_has_a_fixed_key_order():
    offsets = {("b", 10): 3, ("a", 2): 7, ("b", 2): 1, ("a", 0): 4}
    assert to_offset_json(offsets) == '{"a":{"0":4,"2":7},"b":{"2":1,"10":3}}'
    assert list(to_offset_dict(offsets)["b"]) == ["2", "10"]
    assert from_offset_dict(to_offset_dict(offsets)) == offsets


def test_exactly_once_sink_options():
    base = {"kafka.bootstrap.servers": "x:1", "topic": "t"}
    assert not parse_sink_options(base).exactly_once
    opts = parse_sink_options({**base, "kafkalite.sink.exactlyOnce": "TRUE"})
    assert opts.exactly_once and opts.client["transaction.timeout.ms"] == "900000"
    with pytest.raises(ValueError, match=r"needs 'kafkalite\.sink\.exactlyOnce'"):
        parse_sink_options({**base, "kafkalite.sink.transactionalIdPrefix": "p"})
    with pytest.raises(ValueError, match=r"transactional\.id' is not supported"):
        parse_sink_options({**base, "kafka.transactional.id": "x"})
    with pytest.raises(ValueError, match="acks"):
        parse_sink_options({**base, "kafkalite.sink.exactlyOnce": "true", "kafka.acks": "1"})
