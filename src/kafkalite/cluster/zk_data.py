"""Kafka's ZooKeeper layout (ZK mode, Kafka 3.x): the znode paths and the JSON each holds — cluster id,
broker registrations, controller and its epoch, topic assignments and partition states, topic configs,
topic deletion, ISR change notifications. Pure: encoding and decoding only, no ZooKeeper client.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from kafkalite.cluster.metadata_cache import ListenerEndpoint
from kafkalite.security.quota import QuotaEntity

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdManager claims ids in blocks of this many
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
CONFIG_USERS = "/config/users"
CONFIG_CLIENTS = "/config/clients"
CONFIG_IPS = "/config/ips"  # KIP-612: connection_creation_rate per IP address
CONFIG_GROUPS = "/config/groups"  # kafkalite's: per-group configs (Kafka keeps them in KRaft only)
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# the persistent paths a Kafka cluster creates at startup
PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQID,
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    "/config/clients",
    CONFIG_USERS,
)


class ZkDataError(ValueError):
    """A znode holds something that is not the JSON Kafka writes there."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"znode {path}: {why}")
        self.path = path


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _load(path: str, data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(path, f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ZkDataError(path, "not a JSON object")
    return doc


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _int(path: str, doc: dict[str, Any], key: str) -> int:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ZkDataError(path, f"{key!r} is missing or not a number")
    try:
        return int(v)
    except ValueError:
        raise ZkDataError(path, f"{key!r} is not a number: {v!r}") from None


def _int_list(path: str, doc: dict[str, Any], key: str) -> tuple[int, ...]:
    v = doc.get(key)
    if not isinstance(v, list) or not all(isinstance(x, int) for x in v):
        raise ZkDataError(path, f"{key!r} is not a list of broker ids")
    return tuple(v)


def _now_ms() -> str:
    return str(int(time.time() * 1000))


# -- /cluster/id ------------------------------------------------------------------------------------
def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    doc = _load(CLUSTER_ID, data)
    cid = doc.get("id")
    if not isinstance(cid, str) or not cid:
        raise ZkDataError(CLUSTER_ID, "no cluster id")
    return cid


# -- topic ids: Kafka writes a Uuid as 22 characters of URL-safe base64 ------------------------------
def encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


# -- /brokers/ids/<id> ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = -1  # the ephemeral znode's czxid (Kafka's broker epoch)
    listeners: tuple[ListenerEndpoint, ...] = ()

    def endpoint(self, listener: str | None) -> tuple[str, int]:
        """host and port of `listener` (the registration's first endpoint when it has none)."""
        for ep in self.listeners:
            if ep.listener == listener:
                return ep.host, ep.port
        return self.host, self.port


def encode_broker(
    host: str, port: int, rack: str | None, listeners: tuple[ListenerEndpoint, ...] = ()
) -> bytes:
    """Kafka's /brokers/ids/<id> document; `host`/`port` (the legacy fields) name the
    inter-broker listener, `endpoints` every advertised listener."""
    eps = listeners or (ListenerEndpoint("PLAINTEXT", host, port, "PLAINTEXT"),)
    doc: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {ep.listener: ep.security_protocol for ep in eps},
        "endpoints": [f"{ep.listener}://{_host_text(ep.host)}:{ep.port}" for ep in eps],
        "jmx_port": -1,
        "port": port,
        "host": host,
        "version": 5,
        "timestamp": _now_ms(),
    }
    if rack is not None:
        doc["rack"] = rack
    return _dump(doc)


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def decode_broker(broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
    path = broker_path(broker_id)
    doc = _load(path, data)
    host, port = doc.get("host"), doc.get("port")
    endpoints = doc.get("endpoints")
    protocols = doc.get("listener_security_protocol_map")
    protocols = protocols if isinstance(protocols, dict) else {}
    listeners: list[ListenerEndpoint] = []
    if isinstance(endpoints, list):
        for url in endpoints:
            if not isinstance(url, str) or "://" not in url:
                continue
            name, hostport = url.split("://", 1)
            h, _, p = hostport.rpartition(":")
            if p.isdigit():
                proto = str(protocols.get(name, name))
                listeners.append(ListenerEndpoint(name, h.strip("[]"), int(p), proto))
    if listeners and not (isinstance(host, str) and host and isinstance(port, int) and port > 0):
        # no legacy fields: the first listener is the one clients and brokers use here
        host, port = listeners[0].host, listeners[0].port
    if not isinstance(host, str) or not isinstance(port, int):
        raise ZkDataError(path, "no endpoint")
    rack = doc.get("rack")
    return BrokerRegistration(
        broker_id, host, port, rack if isinstance(rack, str) else None, epoch, tuple(listeners)
    )


# -- /controller and /controller_epoch -------------------------------------------------------------------
def encode_controller(broker_id: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})


def decode_controller(data: bytes) -> int:
    return _int(CONTROLLER, _load(CONTROLLER, data), "brokerid")


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode().strip())
    except (UnicodeDecodeError, ValueError):
        raise ZkDataError(CONTROLLER_EPOCH, f"not an integer: {data[:40]!r}") from None


# -- /brokers/topics/<topic> -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TopicAssignment:
    topic: str
    topic_id: uuid.UUID
    partitions: dict[int, tuple[int, ...]]  # partition -> replicas, preferred leader first
    # partitions being reassigned (KIP-455): replicas being added / removed; `partitions` holds
    # the union of the original and the target set while the move runs
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)
    version: int = field(default=-1, compare=False)  # the znode's, for a compare-and-set


def encode_topic(
    topic_id: uuid.UUID,
    partitions: dict[int, tuple[int, ...]],
    adding: dict[int, tuple[int, ...]] | None = None,
    removing: dict[int, tuple[int, ...]] | None = None,
) -> bytes:
    def lists(m: dict[int, tuple[int, ...]] | None) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted((m or {}).items()) if r}

    return _dump(
        {
            "version": 3,
            "topic_id": encode_topic_id(topic_id),
            "partitions": {str(p): list(r) for p, r in sorted(partitions.items())},
            "adding_replicas": lists(adding),
            "removing_replicas": lists(removing),
        }
    )


def _replica_map(path: str, doc: dict[str, Any], key: str) -> dict[int, tuple[int, ...]]:
    v = doc.get(key) or {}
    if not isinstance(v, dict):
        raise ZkDataError(path, f"{key!r} is not an object")
    out: dict[int, tuple[int, ...]] = {}
    for k, r in v.items():
        if not k.isdigit() or not isinstance(r, list) or not all(isinstance(x, int) for x in r):
            raise ZkDataError(path, f"{key!r} of partition {k!r} is not a replica list")
        if r:
            out[int(k)] = tuple(r)
    return out


def decode_topic(topic: str, data: bytes, version: int = -1) -> TopicAssignment:
    path = topic_path(topic)
    doc = _load(path, data)
    parts = doc.get("partitions")
    if not isinstance(parts, dict):
        raise ZkDataError(path, "no partitions")
    out: dict[int, tuple[int, ...]] = {}
    for k, v in parts.items():
        if not k.isdigit() or not isinstance(v, list) or not all(isinstance(x, int) for x in v):
            raise ZkDataError(path, f"partition {k!r} has no replica list")
        out[int(k)] = tuple(v)
    tid = doc.get("topic_id")
    try:
        topic_id = decode_topic_id(tid) if isinstance(tid, str) else uuid.UUID(int=0)
    except ValueError:
        raise ZkDataError(path, f"bad topic id {tid!r}") from None
    return TopicAssignment(
        topic,
        topic_id,
        out,
        _replica_map(path, doc, "adding_replicas"),
        _replica_map(path, doc, "removing_replicas"),
        version,
    )


# -- /admin/reassign_partitions (the legacy reassignment request, Kafka before KIP-455) ------------------
def encode_reassignment_request(targets: dict[tuple[str, int], tuple[int, ...]]) -> bytes:
    return _dump(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r)}
                for (t, p), r in sorted(targets.items())
            ],
        }
    )


def decode_reassignment_request(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    doc = _load(REASSIGN_PARTITIONS, data)
    parts = doc.get("partitions")
    if not isinstance(parts, list):
        raise ZkDataError(REASSIGN_PARTITIONS, "no partitions")
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for e in parts:
        if not isinstance(e, dict):
            raise ZkDataError(REASSIGN_PARTITIONS, "a partition entry is not an object")
        t, p = e.get("topic"), e.get("partition")
        if not isinstance(t, str) or isinstance(p, bool) or not isinstance(p, int):
            raise ZkDataError(REASSIGN_PARTITIONS, "a partition entry has no topic or partition")
        out[(t, p)] = _int_list(REASSIGN_PARTITIONS, e, "replicas")
    return out


# -- /log_dir_event_notification/log_dir_event_<seq> (a broker's log dir failed) ---------------------------
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailure


def encode_log_dir_event(broker_id: int, event: int = LOG_DIR_FAILURE) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "event": event})


def decode_log_dir_event(data: bytes) -> int:
    """The broker id of a log dir event notification."""
    doc = _load(LOG_DIR_EVENT_NOTIFICATION, data)
    return _int(LOG_DIR_EVENT_NOTIFICATION, doc, "broker")


# -- /admin/preferred_replica_election (Kafka's kafka-preferred-replica-election.sh before ElectLeaders) ----
def encode_preferred_replica_election(partitions: list[tuple[str, int]]) -> bytes:
    return _dump(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


def decode_preferred_replica_election(data: bytes) -> list[tuple[str, int]]:
    doc = _load(PREFERRED_REPLICA_ELECTION, data)
    parts = doc.get("partitions")
    if not isinstance(parts, list):
        raise ZkDataError(PREFERRED_REPLICA_ELECTION, "no partitions")
    out: list[tuple[str, int]] = []
    for e in parts:
        t = e.get("topic") if isinstance(e, dict) else None
        p = e.get("partition") if isinstance(e, dict) else None
        if not isinstance(t, str) or isinstance(p, bool) or not isinstance(p, int):
            raise ZkDataError(PREFERRED_REPLICA_ELECTION, f"not a topic and partition: {e!r}")
        out.append((t, p))
    return list(dict.fromkeys(out))


# -- /brokers/topics/<topic>/partitions/<p>/state ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PartitionStateZNode:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int = -1  # the znode's version: the partition epoch compared on every update


def encode_partition_state(
    leader: int, leader_epoch: int, isr: tuple[int, ...], controller_epoch: int
) -> bytes:
    return _dump(
        {
            "controller_epoch": controller_epoch,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": list(isr),
        }
    )


def decode_partition_state(
    topic: str, partition: int, data: bytes, version: int = -1
) -> PartitionStateZNode:
    path = partition_state_path(topic, partition)
    doc = _load(path, data)
    return PartitionStateZNode(
        _int(path, doc, "leader"),
        _int(path, doc, "leader_epoch"),
        _int_list(path, doc, "isr"),
        _int(path, doc, "controller_epoch"),
        version,
    )


# -- /config/topics/<topic> and /config/changes ---------------------------------------------------------------
def encode_config(config: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(sorted(config.items()))})


def decode_config(path: str, data: bytes | None) -> dict[str, str]:
    if not data:  # a parent created on the way to a child entity (users/<u>/clients/<c>) is empty
        return {}
    doc = _load(path, data)
    cfg = doc.get("config", {})
    if not isinstance(cfg, dict):
        raise ZkDataError(path, "config is not an object")
    return {str(k): str(v) for k, v in cfg.items()}


def sanitize_entity_name(name: str) -> str:
    """A user (or client id) as Kafka writes it in a znode name: URL-encoded, `*` as %2A."""
    if name == "<default>":  # Kafka's default entity keeps its name
        return name
    return quote(name, safe="").replace("~", "%7E")


def desanitize_entity_name(name: str) -> str:
    return unquote(name)


def user_config_path(user: str) -> str:
    """/config/users/<user>: `{"version":1,"config":{"SCRAM-SHA-256":"salt=...,..."}}`."""
    return f"{CONFIG_USERS}/{sanitize_entity_name(user)}"


def quota_entity_path(entity: QuotaEntity) -> str:
    """The entity path of a client quota, as /config/changes names it: "users/<u>",
    "users/<u>/clients/<c>", "clients/<c>" or "ips/<ip>" (`<default>` for a default entity)."""
    if entity.ip is not None:
        return f"ips/{sanitize_entity_name(entity.ip)}"
    if entity.user is not None:
        base = f"users/{sanitize_entity_name(entity.user)}"
        if entity.client_id is None:
            return base
        return f"{base}/clients/{sanitize_entity_name(entity.client_id)}"
    assert entity.client_id is not None
    return f"clients/{sanitize_entity_name(entity.client_id)}"


def quota_entity_config_path(entity: QuotaEntity) -> str:
    """Where a client quota's config lives: /config/ + its entity path."""
    return f"/config/{quota_entity_path(entity)}"


def parse_quota_entity_path(entity_path: str) -> QuotaEntity | None:
    """The quota entity a /config/changes entity path names, or None if it names something else."""
    parts = entity_path.split("/")
    if len(parts) == 2 and parts[0] == "users" and parts[1]:
        return QuotaEntity(desanitize_entity_name(parts[1]), None)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return QuotaEntity(desanitize_entity_name(parts[1]), desanitize_entity_name(parts[3]))
    if len(parts) == 2 and parts[0] == "clients" and parts[1]:
        return QuotaEntity(None, desanitize_entity_name(parts[1]))
    if len(parts) == 2 and parts[0] == "ips" and parts[1]:
        return QuotaEntity(ip=desanitize_entity_name(parts[1]))
    return None


def group_entity_path(group_id: str) -> str:
    """The entity path of a group's configs, as /config/changes names it: "groups/<group id>"."""
    return f"groups/{sanitize_entity_name(group_id)}"


def group_config_path(group_id: str) -> str:
    """/config/groups/<group id>: `{"version":1,"config":{"share.auto.offset.reset":"earliest"}}`."""
    return f"/config/{group_entity_path(group_id)}"


def parse_group_entity_path(entity_path: str) -> str | None:
    """The group id a /config/changes entity path names, or None if it names something else."""
    kind, _, name = entity_path.partition("/")
    if kind != "groups" or not name or "/" in name:
        return None
    return desanitize_entity_name(name)


def encode_config_change(entity_path: str) -> bytes:
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(path: str, data: bytes) -> str:
    """The entity path ("topics/<name>", "brokers/<id>", ...) a change notification names."""
    entity = _load(path, data).get("entity_path")
    if not isinstance(entity, str):
        raise ZkDataError(path, "no entity_path")
    return entity


# -- /isr_change_notification ------------------------------------------------------------------------------
def encode_isr_change(partitions: list[tuple[str, int]]) -> bytes:
    return _dump(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


def decode_isr_change(path: str, data: bytes) -> list[tuple[str, int]]:
    doc = _load(path, data)
    parts = doc.get("partitions")
    if not isinstance(parts, list):
        raise ZkDataError(path, "no partitions")
    out: list[tuple[str, int]] = []
    for e in parts:
        if not isinstance(e, dict):
            raise ZkDataError(path, "a partition entry is not an object")
        t, p = e.get("topic"), e.get("partition")
        if not isinstance(t, str) or not isinstance(p, int):
            raise ZkDataError(path, "a partition entry has no topic or partition")
        out.append((t, p))
    return out


# -- /latest_producer_id_block ---------------------------------------------------------------------------
def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    """Kafka writes the block's bounds as strings (they are longs)."""
    return _dump(
        {"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)}
    )


def decode_producer_id_block(data: bytes) -> tuple[int, int]:
    """(block_start, block_end) of the last block some broker claimed."""
    doc = _load(LATEST_PRODUCER_ID_BLOCK, data)
    try:
        return int(doc["block_start"]), int(doc["block_end"])
    except (KeyError, TypeError, ValueError):
        raise ZkDataError(LATEST_PRODUCER_ID_BLOCK, "no block_start / block_end") from None
