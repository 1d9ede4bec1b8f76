"""REST v3 topics, topic configs, partitions and replicas: created, deleted and altered through the
broker's CreateTopics / DeleteTopics / config handlers, described from the metadata cache and local logs.
"""

from __future__ import annotations

from aiohttp import web

from kafkalite.broker.apis.metadata import create_topics, delete_topics
from kafkalite.broker.config.topic_configs import RESOURCE_TOPIC
from kafkalite.cluster.metadata_cache import PartitionMetadata, TopicMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    CREATE_TOPICS,
    DELETE_TOPICS,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.web.rest import configs
from kafkalite.web.rest._base import (
    RestError,
    authorize,
    bad_request,
    broker_of,
    cluster_id,
    context,
    crn,
    field,
    int_param,
    json_body,
    listing,
    no_content,
    not_found,
    ok,
    related,
    require,
    resource,
    url,
)

TIMEOUT_MS = 30_000


def topic_or_404(request: web.Request, name: str | None = None) -> TopicMetadata:
    """The path's topic from the metadata cache; 404 when unknown or not describable (as Kafka hides
    topics one may not describe), like the REST Proxy's UNKNOWN_TOPIC_OR_PARTITION answer."""
    name = name if name is not None else request.match_info["topic_name"]
    topic = broker_of(request).metadata_cache.topic(name)
    if topic is None:
        raise not_found(f"This server does not host this topic-partition. (topic {name})")
    require(
        request,
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        name,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    )
    return topic


def partition_or_404(request: web.Request, topic: TopicMetadata) -> PartitionMetadata:
    pid = int_param(request, "partition_id")
    p = topic.partition(pid)
    if p is None:
        raise not_found(f"This server does not host this topic-partition. ({topic.name}-{pid})")
    return p


def topic_body(request: web.Request, cid: str, t: TopicMetadata) -> dict[str, object]:
    body = resource("KafkaTopic", url(request, cid, "topics", t.name), crn(cid, ("topic", t.name)))
    rf = len(t.partitions[0].replicas) if t.partitions else 0
    body.update(
        {
            "cluster_id": cid,
            "topic_name": t.name,
            "topic_id": str(t.topic_id),
            "is_internal": t.internal,
            "replication_factor": rf,
            "partitions_count": len(t.partitions),
            "partitions": related(url(request, cid, "topics", t.name, "partitions")),
            "configs": related(url(request, cid, "topics", t.name, "configs")),
            "partition_reassignments": related(
                url(request, cid, "topics", t.name, "partitions", "-", "reassignment")
            ),
        }
    )
    return body


async def list_topics(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    cache = broker_of(request).metadata_cache
    data = [
        topic_body(request, cid, t)
        for t in sorted(cache.topics(), key=lambda t: t.name)
        if authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
    ]
    return ok(listing("KafkaTopicList", url(request, cid, "topics"), data))


async def get_topic(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    return ok(topic_body(request, cid, topic_or_404(request)))


async def create_topic(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    body = await json_body(request)
    name = field(body, "topic_name", str)
    partitions = field(body, "partitions_count", int, required=False)
    rf = field(body, "replication_factor", int, required=False)
    raw_configs = field(body, "configs", list, required=False) or []
    validate_only = bool(field(body, "validate_only", bool, required=False))
    cfgs = []
    for c in raw_configs:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise bad_request("Every entry of configs needs a string name")
        value = c.get("value")
        cfgs.append(
            CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(
                name=c["name"], value=None if value is None else str(value)
            )
        )
    req = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name,
                num_partitions=-1 if partitions is None else partitions,
                replication_factor=-1 if rf is None else rf,
                assignments=[],
                configs=cfgs,
            )
        ],
        timeout_ms=TIMEOUT_MS,
        validate_only=validate_only,
    )
    resp = await create_topics.handle(context(request, CREATE_TOPICS, 7), req)
    r = resp.topics[0]
    if r.error_code:
        raise RestError.kafka(r.error_code, r.error_message)
    cache = broker_of(request).metadata_cache
    topic = cache.topic(name)
    if topic is None or validate_only:  # validated only, or leaders not announced yet
        body = resource("KafkaTopic", url(request, cid, "topics", name), crn(cid, ("topic", name)))
        body.update(
            {
                "cluster_id": cid,
                "topic_name": name,
                "is_internal": False,
                "replication_factor": r.replication_factor,
                "partitions_count": r.num_partitions,
                "partitions": related(url(request, cid, "topics", name, "partitions")),
                "configs": related(url(request, cid, "topics", name, "configs")),
            }
        )
        return ok(body, 200 if validate_only else 201)
    return ok(topic_body(request, cid, topic), 201)


async def delete_topic(request: web.Request) -> web.Response:
    cluster_id(request)
    name = request.match_info["topic_name"]
    if broker_of(request).metadata_cache.topic(name) is None:
        topic_or_404(request)
    req = DeleteTopicsRequest(topic_names=[name], timeout_ms=TIMEOUT_MS)
    resp = await delete_topics.handle(context(request, DELETE_TOPICS, 5), req)
    r = resp.responses[0]
    if r.error_code:
        raise RestError.kafka(r.error_code, r.error_message)
    return no_content()


# -- topic configs -------------------------------------------------------------------------------------


def _topic_config_body(
    request: web.Request, cid: str, topic: str, entry: configs.ConfigEntry
) -> dict[str, object]:
    body = resource(
        "KafkaTopicConfig",
        url(request, cid, "topics", topic, "configs", entry.name),
        crn(cid, ("topic", topic), ("config", entry.name)),
    )
    body.update({"cluster_id": cid, "topic_name": topic})
    body.update(configs.entry_fields(entry))
    return body


async def list_topic_configs(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    name = topic_or_404(request).name
    entries = await configs.describe(request, RESOURCE_TOPIC, name)
    data = [_topic_config_body(request, cid, name, e) for e in entries]
    return ok(listing("KafkaTopicConfigList", url(request, cid, "topics", name, "configs"), data))


async def get_topic_config(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    name = topic_or_404(request).name
    cfg = request.match_info["name"]
    for e in await configs.describe(request, RESOURCE_TOPIC, name, [cfg]):
        if e.name == cfg:
            return ok(_topic_config_body(request, cid, name, e))
    raise not_found(f"Config {cfg} cannot be found for topic {name}.")


async def update_topic_config(request: web.Request) -> web.Response:
    cluster_id(request)
    name = topic_or_404(request).name
    body = await json_body(request)
    value = body.get("value")
    if value is None:
        raise bad_request("Missing required field: value")
    if not isinstance(value, str):
        value = str(value).lower() if isinstance(value, bool) else str(value)
    await configs.alter(request, RESOURCE_TOPIC, name, [(request.match_info["name"], 0, value)])
    return no_content()


async def reset_topic_config(request: web.Request) -> web.Response:
    cluster_id(request)
    name = topic_or_404(request).name
    await configs.alter(request, RESOURCE_TOPIC, name, [(request.match_info["name"], 1, None)])
    return no_content()


async def alter_topic_configs(request: web.Request) -> web.Response:
    cluster_id(request)
    name = topic_or_404(request).name
    body = await json_body(request)
    changes = configs.parse_alterations(body)
    await configs.alter(
        request, RESOURCE_TOPIC, name, changes, bool(body.get("validate_only", False))
    )
    return no_content()


# -- partitions and replicas ----------------------------------------------------------------------------


def partition_body(request: web.Request, cid: str, p: PartitionMetadata) -> dict[str, object]:
    base = ("topics", p.topic, "partitions", p.partition)
    body = resource(
        "KafkaPartition",
        url(request, cid, *base),
        crn(cid, ("topic", p.topic), ("partition", p.partition)),
    )
    body.update(
        {
            "cluster_id": cid,
            "topic_name": p.topic,
            "partition_id": p.partition,
            "leader": related(url(request, cid, *base, "replicas", p.leader))
            if p.leader >= 0
            else None,
            "replicas": related(url(request, cid, *base, "replicas")),
            "reassignment": related(url(request, cid, *base, "reassignment")),
            # kafkalite extras for the console
            "leader_id": p.leader if p.leader >= 0 else None,
            "replica_ids": list(p.replicas),
            "isr_ids": list(p.isr),
        }
    )
    body.update(log_figures(request, p.topic, p.partition))
    return body


def log_figures(request: web.Request, topic: str, partition: int) -> dict[str, int | None]:
    """earliest_offset (across tiers) / latest_offset (high watermark) / size_bytes (local) /
    remote_size_bytes (KIP-405; null without tiered storage on the topic) of this broker's replica;
    null when this broker hosts none (another broker's listener knows)."""
    rm = broker_of(request).replica_manager
    part = rm.get_partition(topic, partition)
    if part is None:
        return {
            "earliest_offset": None,
            "latest_offset": None,
            "size_bytes": None,
            "remote_size_bytes": None,
        }
    rlm = rm.remote_log_manager
    tiered = rlm is not None and part.config.remote_storage_enable
    return {
        "earliest_offset": rlm.log_start_offset(part) if rlm is not None else part.log_start_offset,
        "latest_offset": part.high_watermark,
        "size_bytes": part.size_in_bytes,
        "remote_size_bytes": rlm.remote_size(topic, partition)
        if rlm is not None and tiered
        else None,
    }


async def list_partitions(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    t = topic_or_404(request)
    data = [
        partition_body(request, cid, p) for p in sorted(t.partitions, key=lambda p: p.partition)
    ]
    return ok(
        listing("KafkaPartitionList", url(request, cid, "topics", t.name, "partitions"), data)
    )


async def get_partition(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    t = topic_or_404(request)
    return ok(partition_body(request, cid, partition_or_404(request, t)))


def replica_body(
    request: web.Request, cid: str, p: PartitionMetadata, bid: int
) -> dict[str, object]:
    body = resource(
        "KafkaReplica",
        url(request, cid, "topics", p.topic, "partitions", p.partition, "replicas", bid),
        crn(cid, ("topic", p.topic), ("partition", p.partition), ("replica", bid)),
    )
    body.update(
        {
            "cluster_id": cid,
            "topic_name": p.topic,
            "partition_id": p.partition,
            "broker_id": bid,
            "is_leader": bid == p.leader,
            "is_in_sync": bid in p.isr,
            "broker": related(url(request, cid, "brokers", bid)),
        }
    )
    return body


async def list_replicas(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    p = partition_or_404(request, topic_or_404(request))
    data = [replica_body(request, cid, p, b) for b in p.replicas]
    self_url = url(request, cid, "topics", p.topic, "partitions", p.partition, "replicas")
    return ok(listing("KafkaReplicaList", self_url, data))


async def get_replica(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    p = partition_or_404(request, topic_or_404(request))
    bid = int_param(request, "broker_id")
    if bid not in p.replicas:
        raise not_found(f"Replica {bid} of {p.topic}-{p.partition} cannot be found.")
    return ok(replica_body(request, cid, p, bid))


def add_routes(app: web.Application) -> None:
    r = app.router
    topics = "/v3/clusters/{cluster_id}/topics"
    topic = topics + "/{topic_name}"
    r.add_get(topics, list_topics)
    r.add_post(topics, create_topic)
    r.add_get(topic, get_topic)
    r.add_delete(topic, delete_topic)
    r.add_get(topic + "/configs", list_topic_configs)
    r.add_post(topic + "/configs:alter", alter_topic_configs)
    r.add_get(topic + "/configs/{name}", get_topic_config)
    r.add_put(topic + "/configs/{name}", update_topic_config)
    r.add_delete(topic + "/configs/{name}", reset_topic_config)
    r.add_get(topic + "/partitions", list_partitions)
    r.add_get(topic + "/partitions/{partition_id}", get_partition)
    r.add_get(topic + "/partitions/{partition_id}/replicas", list_replicas)
    r.add_get(topic + "/partitions/{partition_id}/replicas/{broker_id}", get_replica)
