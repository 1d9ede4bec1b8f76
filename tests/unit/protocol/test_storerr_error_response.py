"""The whole-request error response built from the declarations: for every API and version it encodes, and
each entry the request names (topic, partition, group, resource, key) comes back carrying the error.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import kafkalite.protocol.messages  # noqa: F401  (registers every API)
from kafkalite.protocol.error_response import error_response
from kafkalite.protocol.schema import APIS, PRIMITIVE_TYPES, Struct, Versions

_SAMPLE: dict[str, Any] = {
    "int8": 1, "int16": 2, "int32": 7, "int64": 9, "uint16": 3, "float64": 1.5, "bool": True,
    "string": "s", "uuid": uuid.UUID(int=5), "bytes": b"b",
}  # fmt: skip
# their answers name each entry in a way the request does not (per user from two lists; per
# topic across log dirs): the builder reports no error, and the broker closes the connection
UNANSWERABLE = {"AlterUserScramCredentials", "AlterReplicaLogDirs"}


def sample(cls: type[Struct], version: int) -> Any:
    """A request with one entry in every array and a value in every field of `version`."""
    obj = cls()
    for f in cls._schema.fields:
        if version not in Versions.parse(f.versions):
            continue
        elem = f.type.removeprefix("[]")
        if elem in PRIMITIVE_TYPES:
            if elem == "records":
                continue
            value = _SAMPLE[elem]
            setattr(obj, f.name, [value] if f.type.startswith("[]") else value)
        else:
            child = sample(cls._schema.children[f.name], version)
            setattr(obj, f.name, [child] if f.type.startswith("[]") else child)
    return obj


@pytest.mark.parametrize("key", sorted(APIS), ids=lambda k: APIS[k].name)
def test_every_api_and_version_encodes_with_the_error(key: int) -> None:
    api = APIS[key]
    for v in range(api.min_version, api.max_version + 1):
        resp, errors = error_response(api.response, sample(api.request, v), v, 56, "boom")
        resp.encode(v)
        if api.name not in UNANSWERABLE:
            assert errors >= 1, (api.name, v)
        # an empty request (no entries) still encodes
        error_response(api.response, api.request(), v, 56, None)[0].encode(v)


def test_partitions_of_topics_mirror_the_request() -> None:
    api = APIS[2]  # ListOffsets
    cls: Any = api.request
    req = cls(
        topics=[
            cls.ListOffsetsTopic(
                name=n,
                partitions=[
                    cls.ListOffsetsTopic.ListOffsetsPartition(partition_index=i) for i in ps
                ],
            )
            for n, ps in (("a", [0, 2]), ("b", [5]))
        ]
    )
    resp, errors = error_response(api.response, req, 8, 56, None)
    assert errors == 3
    got = [
        (t.name, p.partition_index, p.error_code, p.offset)
        for t in resp.topics
        for p in t.partitions
    ]
    assert got == [("a", 0, 56, -1), ("a", 2, 56, -1), ("b", 5, 56, -1)]


def test_primitive_lists_and_differently_named_arrays() -> None:
    # DescribeGroups: groups [string] -> groups[].group_id
    dg: Any = APIS[15].request
    resp, _ = error_response(APIS[15].response, dg(groups=["g1", "g2"]), 5, 56, None)
    assert [(g.group_id, g.error_code) for g in resp.groups] == [("g1", 56), ("g2", 56)]
    # FindCoordinator v4: coordinator_keys [string] -> coordinators[].key
    fc: Any = APIS[10].request
    resp, _ = error_response(APIS[10].response, fc(key_type=0, coordinator_keys=["x"]), 4, 56, "m")
    assert [(c.key, c.error_code, c.error_message) for c in resp.coordinators] == [("x", 56, "m")]
    # FindCoordinator v1: one coordinator, unknown (-1), not node 0
    resp, _ = error_response(APIS[10].response, fc(key="g", key_type=0), 1, 56, "m")
    assert (resp.error_code, resp.error_message, resp.node_id) == (56, "m", -1)
    # DescribeConfigs: resources[] -> results[]; the configuration keys asked for are not echoed
    dc: Any = APIS[32].request
    res = dc.DescribeConfigsResource(resource_type=2, resource_name="t", configuration_keys=["k"])
    resp, _ = error_response(APIS[32].response, dc(resources=[res]), 4, 56, None)
    [r] = resp.results
    assert (r.resource_type, r.resource_name, r.error_code, r.configs) == (2, "t", 56, [])
    # Fetch: partition -> partition_index, a top-level error as well
    fetch: Any = APIS[1].request
    part = fetch.FetchTopic.FetchPartition(partition=4, fetch_offset=10)
    req = fetch(topics=[fetch.FetchTopic(topic="t", partitions=[part])])
    resp, errors = error_response(APIS[1].response, req, 12, 56, None)
    assert errors == 2 and resp.error_code == 56
    [p] = resp.responses[0].partitions
    assert (p.partition_index, p.error_code, p.high_watermark) == (4, 56, -1)
    # CreateAcls: results answer creations in order, with no identity of their own
    ca: Any = APIS[30].request
    creation = ca.AclCreation(resource_type=2, resource_name="t", principal="User:a", host="*")
    resp, _ = error_response(APIS[30].response, ca(creations=[creation, creation]), 3, 56, None)
    assert [r.error_code for r in resp.results] == [56, 56]
