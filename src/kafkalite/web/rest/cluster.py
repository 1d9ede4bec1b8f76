"""REST v3 clusters and brokers: the cluster (its controller and links), its live brokers, and a
broker's configs (served by that broker's own listener, as DescribeConfigs answers only for itself).
"""

from __future__ import annotations

from aiohttp import web

from kafkalite.broker.config.topic_configs import RESOURCE_BROKER
from kafkalite.cluster.metadata_cache import BrokerEndpoint
from kafkalite.web.rest import configs
from kafkalite.web.rest._base import (
    RestError,
    broker_of,
    cluster_id,
    crn,
    int_param,
    listing,
    not_found,
    ok,
    related,
    resource,
    url,
)


def cluster_body(request: web.Request, cid: str) -> dict[str, object]:
    broker = broker_of(request)
    controller = broker.metadata_cache.controller_id
    if broker.zk_broker is None:
        controller = broker.broker_id
    body = resource("KafkaCluster", url(request, cid), crn(cid))
    body.update(
        {
            "cluster_id": cid,
            "controller": related(url(request, cid, "brokers", controller))
            if controller >= 0
            else None,
            "acls": related(url(request, cid, "acls")),
            "brokers": related(url(request, cid, "brokers")),
            "broker_configs": related(url(request, cid, "broker-configs")),
            "consumer_groups": related(url(request, cid, "consumer-groups")),
            "topics": related(url(request, cid, "topics")),
            "partition_reassignments": related(
                url(request, cid, "topics", "-", "partitions", "-", "reassignment")
            ),
        }
    )
    return body


async def list_clusters(request: web.Request) -> web.Response:
    cid = broker_of(request).cluster_id
    return ok(
        listing(
            "KafkaClusterList",
            f"{request.scheme}://{request.host}/v3/clusters",
            [cluster_body(request, cid)],
        )
    )


async def get_cluster(request: web.Request) -> web.Response:
    return ok(cluster_body(request, cluster_id(request)))


def _brokers(request: web.Request) -> list[BrokerEndpoint]:
    broker = broker_of(request)
    return sorted(broker.metadata_cache.alive_brokers(), key=lambda b: b.broker_id)


def broker_body(request: web.Request, cid: str, b: BrokerEndpoint) -> dict[str, object]:
    body = resource(
        "KafkaBroker", url(request, cid, "brokers", b.broker_id), crn(cid, ("broker", b.broker_id))
    )
    body.update(
        {
            "cluster_id": cid,
            "broker_id": b.broker_id,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
            "configs": related(url(request, cid, "brokers", b.broker_id, "configs")),
            "partition_replicas": related(
                url(request, cid, "brokers", b.broker_id, "partition-replicas")
            ),
        }
    )
    return body


async def list_brokers(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    data = [broker_body(request, cid, b) for b in _brokers(request)]
    return ok(listing("KafkaBrokerList", url(request, cid, "brokers"), data))


def _broker(request: web.Request) -> BrokerEndpoint:
    bid = int_param(request, "broker_id")
    for b in _brokers(request):
        if b.broker_id == bid:
            return b
    raise not_found(f"Broker {bid} cannot be found.")


async def get_broker(request: web.Request) -> web.Response:
    cid = cluster_id(request)
    return ok(broker_body(request, cid, _broker(request)))


def _config_body(
    request: web.Request, cid: str, bid: int, entry: configs.ConfigEntry
) -> dict[str, object]:
    body = resource(
        "KafkaBrokerConfig",
        url(request, cid, "brokers", bid, "configs", entry.name),
        crn(cid, ("broker", bid), ("config", entry.name)),
    )
    body.update({"cluster_id": cid, "broker_id": bid})
    body.update(configs.entry_fields(entry))
    return body


async def _own_broker_entries(
    request: web.Request, names: list[str] | None = None
) -> tuple[str, int, list[configs.ConfigEntry]]:
    cid = cluster_id(request)
    b = _broker(request)
    here = broker_of(request).broker_id
    if b.broker_id != here:
        raise RestError(
            421,
            f"Broker {b.broker_id}'s configs are described by broker {b.broker_id}'s own HTTP "
            f"listener; this is broker {here}",
        )
    return (
        cid,
        b.broker_id,
        await configs.describe(request, RESOURCE_BROKER, str(b.broker_id), names),
    )


async def list_broker_configs(request: web.Request) -> web.Response:
    cid, bid, entries = await _own_broker_entries(request)
    data = [_config_body(request, cid, bid, e) for e in entries]
    return ok(listing("KafkaBrokerConfigList", url(request, cid, "brokers", bid, "configs"), data))


async def get_broker_config(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    cid, bid, entries = await _own_broker_entries(request, [name])
    for e in entries:
        if e.name == name:
            return ok(_config_body(request, cid, bid, e))
    raise not_found(f"Config {name} cannot be found for broker {bid}.")


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/v3/clusters", list_clusters)
    r.add_get("/v3/clusters/{cluster_id}", get_cluster)
    r.add_get("/v3/clusters/{cluster_id}/brokers", list_brokers)
    r.add_get("/v3/clusters/{cluster_id}/brokers/{broker_id}", get_broker)
    r.add_get("/v3/clusters/{cluster_id}/brokers/{broker_id}/configs", list_broker_configs)
    r.add_get("/v3/clusters/{cluster_id}/brokers/{broker_id}/configs/{name}", get_broker_config)
