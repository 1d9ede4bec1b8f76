"""KafkaAdminClient: topics (create/delete/list/describe, partitions), configs (describe/alter), groups
(list/describe/delete, offsets list/alter), transactions, delete records and describe cluster.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kafkalite.client import admin_transactions as txns
from kafkalite.client.admin_transactions import (
    AbortTransactionSpec,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from kafkalite.client.config import ADMIN, make_config
from kafkalite.client.errors import KafkaTimeoutError
from kafkalite.client.io_thread import IOThread
from kafkalite.client.network import NetworkClient
from kafkalite.client.structs import OffsetAndMetadata, TopicPartition
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
)
from kafkalite.protocol.messages.groups import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    decode_assignment,
)
from kafkalite.protocol.messages.offsets import OffsetCommitRequest, OffsetFetchRequest
from kafkalite.protocol.schema import APIS, Request, Response

_Resp = TypeVar("_Resp", bound=Response)

log = logging.getLogger("kafkalite.client.admin")
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 3
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignments: dict[int, list[int]] = field(default_factory=dict)
    topic_configs: dict[str, str] = field(default_factory=dict)


@dataclass
class TopicDescription:
    name: str
    is_internal: bool
    partitions: list[Any]  # metadata PartitionInfo
    topic_id: Any = None


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        raise KafkaError(code, f"{what}" + (f": {message}" if message else ""))


class KafkaAdminClient:
    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = cfg = make_config(ADMIN, config, kwargs)
        self._io = IOThread(f"kafkalite-admin-{cfg['client.id']}")
        self._client = NetworkClient(cfg, self._io)
        self._client.metadata.want_all = True
        self._timeout = int(cfg["default.api.timeout.ms"]) / 1000

    def _run(self, coro: Any) -> Any:
        return self._io.run(coro, self._timeout + 5)

    async def _any(self, request: Request[_Resp], cap: int | None = None) -> _Resp:
        node = self._client.least_loaded_node()
        conn = await self._client.connection(node)
        return await conn.send(request, version=conn.version(request.API_KEY, cap))

    async def _to(self, node: int, request: Request[_Resp], cap: int | None = None) -> _Resp:
        conn = await self._client.connection(node)
        return await conn.send(request, version=conn.version(request.API_KEY, cap))

    async def _controller(self, request: Any, cap: int | None = None) -> Any:
        md = self._client.metadata
        if md.controller_id < 0 or md.broker(md.controller_id) is None:
            await self._client.refresh_metadata(None)
        node = md.controller_id if md.broker(md.controller_id) else self._client.least_loaded_node()
        return await self._to(node, request, cap)

    # -- topics
    def create_topics(
        self, new_topics: list[NewTopic], timeout_ms: int | None = None, validate_only: bool = False
    ) -> dict[str, int]:
        """Create topics; raises KafkaError on the first failure. Returns {name: error code (0)}."""
        req_cls = CreateTopicsRequest
        T = req_cls.CreatableTopic
        topics = [
            T(
                name=t.name,
                num_partitions=t.num_partitions if not t.replica_assignments else -1,
                replication_factor=t.replication_factor if not t.replica_assignments else -1,
                assignments=[
                    T.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                    for p, b in sorted(t.replica_assignments.items())
                ],
                configs=[
                    T.CreatableTopicConfig(name=k, value=str(v)) for k, v in t.topic_configs.items()
                ],
            )
            for t in new_topics
        ]
        req = req_cls(
            topics=topics,
            timeout_ms=int(timeout_ms if timeout_ms is not None else self._timeout * 1000),
            validate_only=validate_only,
        )
        resp = self._run(self._controller(req))
        out = {}
        for t in resp.topics:
            out[t.name] = t.error_code
        for t in resp.topics:
            _check(t.error_code, f"create topic {t.name}", t.error_message)
        self._wait_for_topics([t.name for t in new_topics], present=True)
        return out

    def _wait_for_topics(self, names: list[str], present: bool, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._run(self._client.refresh_metadata(None))
            topics = self._client.metadata.topics
            if all(
                ((n in topics and topics[n].partitions) if present else n not in topics)
                for n in names
            ):
                return
            time.sleep(0.05)

    def delete_topics(self, topics: list[str], timeout_ms: int | None = None) -> dict[str, int]:
        req_cls = DeleteTopicsRequest
        t_ms = int(timeout_ms if timeout_ms is not None else self._timeout * 1000)

        async def go() -> Any:
            conn_node = self._client.least_loaded_node()
            conn = await self._client.connection(conn_node)
            v = conn.version(20)
            if v >= 6:
                req = req_cls(
                    topics=[req_cls.DeleteTopicState(name=n) for n in topics], timeout_ms=t_ms
                )
            else:
                req = req_cls(topic_names=list(topics), timeout_ms=t_ms)
            return await conn.send(req, version=v)

        resp = self._run(go())
        out = {r.name: r.error_code for r in resp.responses}
        for r in resp.responses:
            _check(r.error_code, f"delete topic {r.name}")
        self._wait_for_topics(list(topics), present=False)
        return out

    def list_topics(self, include_internal: bool = False) -> list[str]:
        self._run(self._client.refresh_metadata(None))
        return sorted(
            n
            for n, t in self._client.metadata.topics.items()
            if include_internal or not t.is_internal
        )

    def describe_topics(self, topics: list[str] | None = None) -> list[TopicDescription]:
        self._run(self._client.refresh_metadata(None if topics is None else list(topics)))
        md = self._client.metadata
        out = []
        for name in topics if topics is not None else sorted(md.topics):
            t = md.topics.get(name)
            if t is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
            _check(t.error_code, f"describe topic {name}")
            out.append(
                TopicDescription(
                    name, t.is_internal, [t.partitions[p] for p in sorted(t.partitions)], t.topic_id
                )
            )
        return out

    def create_partitions(
        self, new_counts: dict[str, int], validate_only: bool = False
    ) -> dict[str, int]:
        req_cls = CreatePartitionsRequest
        req = req_cls(
            topics=[
                req_cls.CreatePartitionsTopic(name=n, count=c, assignments=None)
                for n, c in new_counts.items()
            ],
            timeout_ms=int(self._timeout * 1000),
            validate_only=validate_only,
        )
        resp = self._run(self._controller(req))
        for r in resp.results:
            _check(r.error_code, f"create partitions {r.name}", r.error_message)
        return {r.name: r.error_code for r in resp.results}

    # -- configs
    def describe_configs(
        self, resources: list[tuple[int, str]], keys: list[str] | None = None
    ) -> dict[tuple[int, str], dict[str, Any]]:
        """{(resource_type, name): {config name: entry with .value, .read_only, .config_source, ...}}."""
        req_cls = DescribeConfigsRequest
        out: dict[tuple[int, str], dict[str, Any]] = {}

        async def go() -> None:
            for rtype, name in resources:
                req = req_cls(
                    resources=[
                        req_cls.DescribeConfigsResource(
                            resource_type=rtype, resource_name=name, configuration_keys=keys
                        )
                    ],
                    include_synonyms=False,
                )
                if (
                    rtype == RESOURCE_BROKER
                    and name.isdigit()
                    and self._client.metadata.broker(int(name))
                ):
                    resp = await self._to(int(name), req)
                else:
                    resp = await self._any(req)
                for r in resp.results:
                    _check(r.error_code, f"describe configs {r.resource_name}", r.error_message)
                    out[(r.resource_type, r.resource_name)] = {c.name: c for c in r.configs}

        self._run(go())
        return out

    def alter_configs(
        self, resources: dict[tuple[int, str], dict[str, str | None]], incremental: bool = True
    ) -> None:
        """Set (value) or delete (None) configs. Incremental (API 44) when offered, else AlterConfigs."""

        async def go() -> None:
            node = self._client.least_loaded_node()
            conn = await self._client.connection(node)
            use_inc = incremental and 44 in conn.versions
            key = 44 if use_inc else 33
            req_cls: Any = APIS[key].request
            R = req_cls.AlterConfigsResource
            res = []
            for (rtype, name), cfg in resources.items():
                if use_inc:
                    entries = [
                        R.AlterableConfig(
                            name=k, config_operation=OP_DELETE if v is None else OP_SET, value=v
                        )
                        for k, v in cfg.items()
                    ]
                else:
                    entries = [
                        R.AlterableConfig(name=k, value=v) for k, v in cfg.items() if v is not None
                    ]
                res.append(R(resource_type=rtype, resource_name=name, configs=entries))
            resp = await conn.send(
                req_cls(resources=res, validate_only=False), version=conn.version(key)
            )
            for r in resp.responses:
                _check(r.error_code, f"alter configs {r.resource_name}", r.error_message)

        self._run(go())

    # -- cluster
    def describe_cluster(self) -> dict[str, Any]:
        async def go() -> Any:
            node = self._client.least_loaded_node()
            conn = await self._client.connection(node)
            if 60 in conn.versions:
                resp = await conn.send(
                    DescribeClusterRequest(include_cluster_authorized_operations=False),
                    version=conn.version(60),
                )
                _check(resp.error_code, "describe cluster", resp.error_message)
                return {
                    "cluster_id": resp.cluster_id,
                    "controller_id": resp.controller_id,
                    "brokers": [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers],
                }
            await self._client.refresh_metadata(None)
            md = self._client.metadata
            return {
                "cluster_id": md.cluster_id,
                "controller_id": md.controller_id,
                "brokers": [(b.node_id, b.host, b.port, b.rack) for b in md.brokers.values()],
            }

        return self._run(go())  # type: ignore[no-any-return]

    # -- records
    def delete_records(self, offsets: dict[Any, int]) -> dict[TopicPartition, int]:
        """Move log start offsets forward: {tp: offset (-1 = high watermark)} -> {tp: new low watermark}."""
        parts = {TopicPartition(*tp): o for tp, o in offsets.items()}
        req_cls = DeleteRecordsRequest

        async def go() -> dict[TopicPartition, int]:
            md = self._client.metadata
            await self._client.refresh_metadata(sorted({tp.topic for tp in parts}))
            by_node: dict[int, dict[str, list[Any]]] = {}
            for tp, off in parts.items():
                leader = md.leader_for(tp.topic, tp.partition)
                if leader < 0:
                    raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, str(tp))
                by_node.setdefault(leader, {}).setdefault(tp.topic, []).append(
                    req_cls.DeleteRecordsTopic.DeleteRecordsPartition(
                        partition_index=tp.partition, offset=off
                    )
                )
            out: dict[TopicPartition, int] = {}
            for node, topics in by_node.items():
                req = req_cls(
                    topics=[
                        req_cls.DeleteRecordsTopic(name=t, partitions=ps)
                        for t, ps in topics.items()
                    ],
                    timeout_ms=int(self._timeout * 1000),
                )
                resp = await self._to(node, req)
                for t in resp.topics:
                    for p in t.partitions:
                        _check(p.error_code, f"delete records {t.name}-{p.partition_index}")
                        out[TopicPartition(t.name, p.partition_index)] = p.low_watermark
            return out

        return self._run(go())  # type: ignore[no-any-return]

    # -- groups
    async def _coordinator(self, group_id: str) -> int:
        req_cls = FindCoordinatorRequest
        node = self._client.least_loaded_node()
        conn = await self._client.connection(node)
        v = conn.version(10)
        for _ in range(50):
            if v >= 4:
                resp = await conn.send(req_cls(key_type=0, coordinator_keys=[group_id]), version=v)
                c = resp.coordinators[0]
                code, node_id, host, port = c.error_code, c.node_id, c.host, c.port
            else:
                resp = await conn.send(req_cls(key=group_id, key_type=0), version=v)
                code, node_id, host, port = resp.error_code, resp.node_id, resp.host, resp.port
            if code == 0:
                pseudo: int = (1 << 30) + node_id
                self._client.extra_nodes[pseudo] = (host, port)
                return pseudo
            if not KafkaError(code).retriable:
                raise KafkaError(code, f"FindCoordinator({group_id})")
            await asyncio.sleep(0.1)
        raise KafkaTimeoutError(f"no coordinator for group {group_id}")

    def list_groups(self) -> list[tuple[str, str, str]]:
        """[(group_id, protocol_type, state)] from every broker."""

        async def go() -> list[tuple[str, str, str]]:
            await self._client.refresh_metadata(None)
            nodes = list(self._client.metadata.brokers) or [self._client.least_loaded_node()]
            out = []
            for n in nodes:
                resp = await self._to(n, ListGroupsRequest(states_filter=[], types_filter=[]))
                _check(resp.error_code, "list groups")
                out += [(g.group_id, g.protocol_type, g.group_state or "") for g in resp.groups]
            return sorted(set(out))

        return self._run(go())  # type: ignore[no-any-return]

    def describe_groups(self, group_ids: list[str]) -> list[GroupDescription]:
        async def go() -> list[GroupDescription]:
            out = []
            for gid in group_ids:
                node = await self._coordinator(gid)
                resp = await self._to(
                    node, DescribeGroupsRequest(groups=[gid], include_authorized_operations=False)
                )
                for g in resp.groups:
                    _check(g.error_code, f"describe group {g.group_id}")
                    members = []
                    for m in g.members:
                        parts: list[TopicPartition] = []
                        if g.protocol_type == "consumer" and m.member_assignment:
                            try:
                                a = decode_assignment(m.member_assignment)
                                parts = [
                                    TopicPartition(t.topic, p)
                                    for t in a.assigned_partitions
                                    for p in t.partitions
                                ]
                            except Exception:
                                parts = []
                        members.append(
                            MemberDescription(
                                m.member_id, m.group_instance_id, m.client_id, m.client_host, parts
                            )
                        )
                    out.append(
                        GroupDescription(
                            g.group_id, g.group_state, g.protocol_type, g.protocol_data, members
                        )
                    )
            return out

        return self._run(go())  # type: ignore[no-any-return]

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        async def go() -> dict[str, int]:
            out = {}
            for gid in group_ids:
                node = await self._coordinator(gid)
                resp = await self._to(node, DeleteGroupsRequest(groups_names=[gid]))
                for r in resp.results:
                    out[r.group_id] = r.error_code
            return out

        out = self._run(go())
        for gid, code in out.items():
            _check(code, f"delete group {gid}")
        return out  # type: ignore[no-any-return]

    def list_consumer_group_offsets(
        self, group_id: str, partitions: list[Any] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        req_cls = OffsetFetchRequest

        async def go() -> Any:
            node = await self._coordinator(group_id)
            topics = None
            if partitions is not None:
                by_topic: dict[str, list[int]] = {}
                for tp in partitions:
                    by_topic.setdefault(tp[0], []).append(tp[1])
                topics = [
                    req_cls.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()
                ]
            return await self._to(
                node, req_cls(group_id=group_id, topics=topics, require_stable=False), cap=7
            )

        resp = self._run(go())
        _check(resp.error_code, f"offsets of group {group_id}")
        out = {}
        for t in resp.topics or []:
            for p in t.partitions:
                _check(p.error_code, f"offset {t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.metadata, p.committed_leader_epoch
                    )
        return out

    def alter_consumer_group_offsets(self, group_id: str, offsets: dict[Any, Any]) -> None:
        """Commit offsets for a group with no active members (generation -1)."""
        req_cls = OffsetCommitRequest
        by_topic: dict[str, list[Any]] = {}
        for tp, om in offsets.items():
            off, meta = (om, "") if isinstance(om, int) else (om[0], om[1] if len(om) > 1 else "")
            by_topic.setdefault(tp[0], []).append(
                req_cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=tp[1], committed_offset=off, committed_metadata=meta or ""
                )
            )
        req = req_cls(
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                req_cls.OffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
        )

        async def go() -> Any:
            node = await self._coordinator(group_id)
            return await self._to(node, req, cap=8)

        resp = self._run(go())
        for t in resp.topics:
            for p in t.partitions:
                _check(p.error_code, f"alter offset {t.name}-{p.partition_index}")

    # -- transactions (admin_transactions holds the requests)
    def describe_transactions(
        self, transactional_ids: list[str]
    ) -> dict[str, TransactionDescription]:
        return self._run(  # type: ignore[no-any-return]
            txns.describe_transactions(self._client, transactional_ids, self._timeout)
        )

    def list_transactions(
        self, states: list[str] | None = None, producer_ids: list[int] | None = None
    ) -> list[TransactionListing]:
        """Transactions of every coordinator; `states` like ["Ongoing"], `producer_ids` to filter."""
        return self._run(  # type: ignore[no-any-return]
            txns.list_transactions(self._client, states, producer_ids)
        )

    def describe_producers(
        self, partitions: list[Any]
    ) -> dict[TopicPartition, list[ProducerState]]:
        return self._run(txns.describe_producers(self._client, partitions))  # type: ignore[no-any-return]

    def abort_transaction(self, spec: AbortTransactionSpec) -> None:
        """Abort a hanging transaction on one partition (producer id, epoch and coordinator epoch as
        describe_producers() shows them)."""
        self._run(txns.abort_transaction(self._client, spec))

    def close(self) -> None:
        try:
            self._io.run(self._client.close(), 5)
        except Exception:
            pass
        self._io.stop()

    def __enter__(self) -> KafkaAdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


AdminClient = KafkaAdminClient
