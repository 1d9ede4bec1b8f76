"""The fetch filter's tagged fields: the hand-written Fetch codecs read tag 10035 and write tags 10035 /
10036 exactly as the schema declarations do, and leave them out (byte for byte as before) when unset."""

from __future__ import annotations

import pytest

from kafkalite.broker.apis.data.fetch import to_schema
from kafkalite.broker.fastpath import FetchResult, decode_fetch, encode_fetch_response
from kafkalite.protocol.messages.fetch import FetchRequest, FetchResponse


def _request(expr: str | None) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=1000,
        topics=[
            FetchRequest.FetchTopic(
                topic="t",
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=5, partition_max_bytes=100
                    )
                ],
            )
        ],
        rack_id="r",
        filter=expr,
    )


@pytest.mark.parametrize("version", [12, 13, 15, 16, 17, 18])
@pytest.mark.parametrize("expr", [None, "", "key = 'é' AND offset > 3" * 20])
def test_fast_decoder_reads_the_filter_tag(version: int, expr: str | None) -> None:
    out = bytearray()
    _request(expr).encode_into(out, version)
    view = decode_fetch(bytes(out), 0, version)
    assert view.filter == expr
    assert view.topics[0].partitions[0].fetch_offset == 5


def test_non_flexible_versions_carry_no_filter() -> None:
    out = bytearray()
    _request("key = 'a'").encode_into(out, 11)
    assert decode_fetch(bytes(out), 0, 11).filter is None


@pytest.mark.parametrize("version", [12, 13, 16])
@pytest.mark.parametrize(
    ("filtered", "error"), [(False, None), (True, None), (False, "invalid fetch filter: x")]
)
def test_fast_encoder_writes_the_answer_tags(
    version: int, filtered: bool, error: str | None
) -> None:
    result = FetchResult([], error_code=42 if error else 0)
    result.filtered = filtered
    result.filter_error = error
    fast = bytearray()
    encode_fetch_response(fast, result, version)
    schema = bytearray()
    resp = to_schema(result)
    resp.filtered = filtered
    resp.filter_error = error
    resp.encode_into(schema, version)
    assert bytes(fast) == bytes(schema)
    back = FetchResponse.decode(bytes(fast), version, 0)
    assert (back.filtered, back.filter_error) == (filtered, error)
