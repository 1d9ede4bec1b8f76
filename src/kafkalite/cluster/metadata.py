"""MetadataStore, the write side of cluster metadata (topics, partition counts, topic ids, config
overrides, ACLs, SCRAM credentials, client quotas): `LocalMetadataStore` keeps a single node's in local files; cluster mode's lives in ZooKeeper.

Also owns meta.properties (cluster id, broker id) in each log directory. Writes are atomic (temp file + rename).
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kafkalite.cluster.acl_data import ACL_FILE, AclDataError, decode_acl_file, encode_acl_file
from kafkalite.cluster.quota_data import (
    QUOTA_FILE,
    QuotaDataError,
    decode_quota_file,
    encode_quota_file,
)
from kafkalite.security.acl import AccessControlEntry, AclBinding, ResourcePattern
from kafkalite.security.quota import QuotaEntity
from kafkalite.security.scram import ScramCredential

METADATA_FILE = "kafkalite-metadata.json"
SCRAM_FILE = "kafkalite-scram-credentials.json"
META_PROPERTIES = "meta.properties"
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def new_cluster_id() -> str:
    """22-character URL-safe base64 of a random UUID, as Kafka's storage tool makes it."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def topic_name_error(name: str | None) -> str | None:
    """Why a topic name is illegal, or None when it is fine."""
    if name is None or name == "":
        return "Topic name is empty"
    if name in (".", ".."):
        return f"Topic name cannot be '{name}'"
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.match(name):
        return f"Topic name '{name}' contains characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class MetadataError(Exception):
    pass


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def ensure_meta_properties(
    log_dirs: list[Path], broker_id: int, expected_cluster_id: str | None = None
) -> str:
    """Read or create meta.properties in every log dir; returns the cluster id (one per data set).
    In cluster mode `expected_cluster_id` is ZooKeeper's: data of another cluster is refused."""
    cluster_id: str | None = None
    for d in log_dirs:
        p = d / META_PROPERTIES
        if p.exists():
            props = _read_properties(p)
            cid = props.get("cluster.id")
            if cid:
                if cluster_id is not None and cid != cluster_id:
                    raise MetadataError(
                        f"{p}: cluster.id {cid} differs from {cluster_id} in another log dir"
                    )
                cluster_id = cid
            bid = props.get("broker.id", props.get("node.id"))
            if bid is not None and int(bid) != broker_id:
                raise MetadataError(
                    f"{p}: broker.id {bid} does not match configured broker.id {broker_id}; "
                    "use the matching broker.id or a fresh data directory"
                )
    if expected_cluster_id is not None:
        if cluster_id is not None and cluster_id != expected_cluster_id:
            raise MetadataError(
                f"the data in {log_dirs[0]} belongs to cluster {cluster_id}, but ZooKeeper's "
                f"cluster is {expected_cluster_id}: point zookeeper.connect at the right cluster "
                "or use a fresh data directory"
            )
        cluster_id = expected_cluster_id
    if cluster_id is None:
        cluster_id = new_cluster_id()
    for d in log_dirs:
        d.mkdir(parents=True, exist_ok=True)
        p = d / META_PROPERTIES
        if not p.exists():
            _atomic_write(
                p, f"#kafkalite\nversion=1\nbroker.id={broker_id}\ncluster.id={cluster_id}\n"
            )
    return cluster_id


class MetadataStore(Protocol):
    """Where topics are created, deleted, grown and configured. Handlers read the MetadataCache;
    these writes reach it through the broker (single node) or the controller (cluster)."""

    def load(self) -> None: ...
    def topics(self) -> list[TopicInfo]: ...
    def get(self, name: str) -> TopicInfo | None: ...
    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...
    def __contains__(self, name: object) -> bool: ...
    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
        *,
        replication_factor: int | None = None,
        assignment: dict[int, tuple[int, ...]] | None = None,
    ) -> TopicInfo: ...
    def delete_topic(self, name: str) -> TopicInfo: ...
    def set_partitions(
        self, name: str, count: int, assignment: dict[int, tuple[int, ...]] | None = None
    ) -> TopicInfo: ...
    def set_configs(self, name: str, configs: dict[str, str]) -> TopicInfo: ...

    # ACLs, one resource pattern at a time (synchronous: call off the event loop in cluster mode)
    def acls(self) -> list[AclBinding]: ...
    def acls_of(self, pattern: ResourcePattern) -> set[AccessControlEntry]: ...
    def update_acls(
        self,
        pattern: ResourcePattern,
        add: Collection[AccessControlEntry] = (),
        remove: Collection[AccessControlEntry] = (),
    ) -> set[AccessControlEntry]: ...
    def watch_acl_changes(self, fn: Callable[[list[ResourcePattern]], None]) -> None:
        """`fn(patterns)` whenever another writer changes the ACLs of these patterns."""

    # SCRAM credentials per user and mechanism: salted and hashed, never a password (synchronous)
    def scram_credentials(self) -> dict[str, dict[str, ScramCredential]]: ...
    def user_scram_credentials(self, user: str) -> dict[str, ScramCredential]: ...
    def alter_scram_credentials(
        self,
        user: str,
        upsert: Mapping[str, ScramCredential],
        delete: Collection[str] = (),
    ) -> dict[str, ScramCredential]: ...

    # client quotas per entity (synchronous)
    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]: ...
    def entity_client_quotas(self, entity: QuotaEntity) -> dict[str, float]: ...
    def alter_client_quotas(
        self, entity: QuotaEntity, upsert: Mapping[str, float], remove: Collection[str] = ()
    ) -> dict[str, float]: ...


class LocalMetadataStore:
    """Topics of a single-node cluster, persisted in `<dir>/kafkalite-metadata.json`. Thread-safe."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / METADATA_FILE
        self._lock = threading.RLock()
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self.generation = 0  # bumped on every change, for caches
        self.acl_path = self.directory / ACL_FILE
        self._acls: dict[ResourcePattern, set[AccessControlEntry]] = {}
        self.scram_path = self.directory / SCRAM_FILE
        self._scram: dict[
            str, dict[str, str]
        ] = {}  # user -> mechanism -> Kafka's credential string
        self.quota_path = self.directory / QUOTA_FILE
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}

    # -- persistence
    def load(self) -> None:
        with self._lock:
            self._topics.clear()
            self._by_id.clear()
            if self.path.exists():
                doc = json.loads(self.path.read_text(encoding="utf-8"))
                for name, t in doc.get("topics", {}).items():
                    info = TopicInfo(
                        name, uuid.UUID(t["id"]), int(t["partitions"]), dict(t.get("configs", {}))
                    )
                    self._topics[name] = info
                    self._by_id[info.topic_id] = info
            self._acls.clear()
            if self.acl_path.exists():
                try:
                    bindings = decode_acl_file(self.acl_path.read_text(encoding="utf-8"))
                except AclDataError as exc:
                    raise MetadataError(f"{self.acl_path}: {exc}") from None
                for b in bindings:
                    self._acls.setdefault(b.pattern, set()).add(b.entry)
            self._scram = {}
            if self.scram_path.exists():
                doc = json.loads(self.scram_path.read_text(encoding="utf-8"))
                users = doc.get("users", {}) if isinstance(doc, dict) else {}
                for user, creds in users.items():
                    for text in creds.values():
                        try:
                            ScramCredential.from_config_string(text)
                        except ValueError as exc:
                            raise MetadataError(f"{self.scram_path}: user {user}: {exc}") from None
                    self._scram[str(user)] = {str(m): str(t) for m, t in creds.items()}
            self._quotas = {}
            if self.quota_path.exists():
                try:
                    self._quotas = decode_quota_file(self.quota_path.read_text(encoding="utf-8"))
                except QuotaDataError as exc:
                    raise MetadataError(f"{self.quota_path}: {exc}") from None
            self.generation += 1

    def _save(self) -> None:
        doc = {
            "version": 1,
            "topics": {
                t.name: {"id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
                for t in self._topics.values()
            },
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True))
        self.generation += 1

    # -- queries
    def topics(self) -> list[TopicInfo]:
        with self._lock:
            return list(self._topics.values())

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    # -- changes
    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
        *,
        replication_factor: int | None = None,
        assignment: dict[int, tuple[int, ...]] | None = None,
    ) -> TopicInfo:
        """A single node holds one replica of each partition: a replication factor or assignment
        asking for anything else is refused."""
        if replication_factor not in (None, -1, 1):
            raise MetadataError(
                f"Replication factor: {replication_factor} larger than available brokers: 1."
            )
        if assignment is not None:
            partitions = len(assignment)
        err = topic_name_error(name)
        if err:
            raise MetadataError(err)
        if partitions < 1:
            raise MetadataError("Number of partitions must be larger than 0")
        with self._lock:
            if name in self._topics:
                raise MetadataError(f"Topic '{name}' already exists")
            norm = name.replace(".", "_")
            for other in self._topics:
                if other != name and other.replace(".", "_") == norm:
                    raise MetadataError(f"Topic '{name}' collides with existing topic '{other}'")
            info = TopicInfo(name, topic_id or uuid.uuid4(), partitions, dict(configs or {}))
            self._topics[name] = info
            self._by_id[info.topic_id] = info
            self._save()
            return info

    def delete_topic(self, name: str) -> TopicInfo:
        with self._lock:
            info = self._topics.pop(name, None)
            if info is None:
                raise MetadataError(f"Topic '{name}' does not exist")
            self._by_id.pop(info.topic_id, None)
            self._save()
            return info

    def set_partitions(
        self, name: str, count: int, assignment: dict[int, tuple[int, ...]] | None = None
    ) -> TopicInfo:
        """One node: every new partition lives here (`assignment` was checked to say so)."""
        with self._lock:
            info = self._topics[name]
            if count <= info.partitions:
                raise MetadataError(
                    f"Topic currently has {info.partitions} partitions, {count} would not be an increase"
                )
            info.partitions = count
            self._save()
            return info

    def set_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        with self._lock:
            info = self._topics[name]
            info.configs = dict(configs)
            self._save()
            return info

    # -- ACLs (their own file, so topic writes and ACL writes never rewrite each other)
    def acls(self) -> list[AclBinding]:
        with self._lock:
            return [AclBinding(p, e) for p, entries in self._acls.items() for e in entries]

    def acls_of(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        with self._lock:
            return set(self._acls.get(pattern, ()))

    def update_acls(
        self,
        pattern: ResourcePattern,
        add: Collection[AccessControlEntry] = (),
        remove: Collection[AccessControlEntry] = (),
    ) -> set[AccessControlEntry]:
        with self._lock:
            entries = (self._acls.get(pattern, set()) | set(add)) - set(remove)
            if entries:
                self._acls[pattern] = entries
            else:
                self._acls.pop(pattern, None)
            self.directory.mkdir(parents=True, exist_ok=True)
            _atomic_write(self.acl_path, encode_acl_file(self.acls()))
            return set(entries)

    def watch_acl_changes(self, fn: Callable[[list[ResourcePattern]], None]) -> None:
        """One node is the only writer: nothing changes behind its back."""

    # -- SCRAM credentials (one JSON file in the data dir, Kafka's credential strings)
    def scram_credentials(self) -> dict[str, dict[str, ScramCredential]]:
        with self._lock:
            return {u: _parse_credentials(c) for u, c in self._scram.items()}

    def user_scram_credentials(self, user: str) -> dict[str, ScramCredential]:
        with self._lock:
            return _parse_credentials(self._scram.get(user, {}))

    def alter_scram_credentials(
        self,
        user: str,
        upsert: Mapping[str, ScramCredential],
        delete: Collection[str] = (),
    ) -> dict[str, ScramCredential]:
        with self._lock:
            creds = {m: t for m, t in self._scram.get(user, {}).items() if m not in delete}
            creds.update({m: c.to_config_string() for m, c in upsert.items()})
            if creds:
                self._scram[user] = creds
            else:
                self._scram.pop(user, None)
            self.directory.mkdir(parents=True, exist_ok=True)
            doc = {"version": 1, "users": self._scram}
            _atomic_write(self.scram_path, json.dumps(doc, indent=1, sort_keys=True))
            return _parse_credentials(creds)

    # -- client quotas (one JSON file in the data dir)
    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        with self._lock:
            return {e: dict(v) for e, v in self._quotas.items()}

    def entity_client_quotas(self, entity: QuotaEntity) -> dict[str, float]:
        with self._lock:
            return dict(self._quotas.get(entity, {}))

    def alter_client_quotas(
        self, entity: QuotaEntity, upsert: Mapping[str, float], remove: Collection[str] = ()
    ) -> dict[str, float]:
        with self._lock:
            values = {k: v for k, v in self._quotas.get(entity, {}).items() if k not in remove}
            values.update(upsert)
            if values:
                self._quotas[entity] = values
            else:
                self._quotas.pop(entity, None)
            self.directory.mkdir(parents=True, exist_ok=True)
            _atomic_write(self.quota_path, encode_quota_file(self._quotas))
            return dict(values)


def _parse_credentials(creds: Mapping[str, str]) -> dict[str, ScramCredential]:
    return {m: ScramCredential.from_config_string(t) for m, t in creds.items()}
