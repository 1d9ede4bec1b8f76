"""ZkMetadataStore: the MetadataStore of cluster mode — topics are created by writing their replica
assignment (Kafka's placement over the live brokers) and config to ZooKeeper, deleted by flagging them
under /admin/delete_topics; the controller takes it from there.

Synchronous like kazoo: the broker calls it off the event loop for anything but quick reads.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Mapping

from kafkalite.cluster import acl_data as ad
from kafkalite.cluster import zk_data
from kafkalite.cluster.controller.election import PlacementError, assign_replicas, check_assignment
from kafkalite.cluster.metadata import MetadataError, TopicInfo, topic_name_error
from kafkalite.cluster.quota_data import QuotaDataError, apply_quota_changes, quotas_from_config
from kafkalite.cluster.zk import KafkaZkClient, ZkError
from kafkalite.cluster.zk_data import ZkDataError
from kafkalite.security.acl import AccessControlEntry, AclBinding, PatternType, ResourcePattern
from kafkalite.security.quota import QuotaEntity
from kafkalite.security.scram import SCRAM_MECHANISMS, ScramCredential

log = logging.getLogger("kafkalite.cluster.zk_metadata_store")
ACL_CHANGE_RETENTION_MS = 15 * 60 * 1000  # Kafka keeps ACL change notifications 15 minutes


class ZkMetadataStore:
    def __init__(self, zk: KafkaZkClient, default_replication_factor: int) -> None:
        self.zk = zk
        self.default_replication_factor = default_replication_factor

    def load(self) -> None:
        """Nothing to load: ZooKeeper is read when asked."""

    def topics(self) -> list[TopicInfo]:
        return [
            TopicInfo(name, a.topic_id, len(a.partitions), self.zk.configs.topic_config(name))
            for name, a in sorted(self.zk.topics().items())
        ]

    def get(self, name: str) -> TopicInfo | None:
        a = self.zk.topic(name)
        if a is None:
            return None
        return TopicInfo(name, a.topic_id, len(a.partitions), self.zk.configs.topic_config(name))

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for info in self.topics():
            if info.topic_id == topic_id:
                return info
        return None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.zk.topic(name) is not None

    def assignment_for(
        self, partitions: int, replication_factor: int | None, start_partition: int = 0
    ) -> dict[int, tuple[int, ...]]:
        """Kafka's placement over the live brokers (rack-aware when every broker has a rack)."""
        rf = (
            self.default_replication_factor
            if replication_factor in (None, -1)
            else replication_factor
        )
        brokers = {b: r.rack for b, r in self.zk.live_brokers().items()}
        try:
            return assign_replicas(
                brokers, partitions, int(rf or 1), start_partition=start_partition
            )
        except PlacementError as exc:
            raise MetadataError(str(exc)) from None

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
        err = topic_name_error(name)
        if err:
            raise MetadataError(err)
        if self.zk.topic(name) is not None:
            raise MetadataError(f"Topic '{name}' already exists.")
        if assignment is None:
            assignment = self.assignment_for(partitions, replication_factor)
        else:
            why = check_assignment(assignment, set(self.zk.live_brokers()))
            if why is not None:
                raise MetadataError(why)
        tid = topic_id or uuid.uuid4()
        try:
            self.zk.create_topic(name, tid, assignment, dict(configs or {}))
        except ZkError as exc:
            raise MetadataError(str(exc)) from None
        return TopicInfo(name, tid, len(assignment), dict(configs or {}))

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.get(name)
        if info is None:
            raise MetadataError(f"Topic '{name}' does not exist")
        self.zk.mark_topic_for_deletion(name)
        return info

    def set_partitions(
        self, name: str, count: int, assignment: dict[int, tuple[int, ...]] | None = None
    ) -> TopicInfo:
        """New partitions placed by Kafka's rule over the live brokers, or as `assignment` says
        (partition -> replicas, for the new partitions only); the controller elects their leaders."""
        a = self.zk.topic(name)
        if a is None:
            raise MetadataError(f"Topic '{name}' does not exist")
        current = len(a.partitions)
        if a.adding or a.removing:
            # as Kafka (REASSIGNMENT_IN_PROGRESS): the controller owns the znode during a move
            raise MetadataError(f"A partition reassignment of topic '{name}' is in progress.")
        if count <= current:
            raise MetadataError(
                f"Topic currently has {current} partitions, {count} would not be an increase"
            )
        if assignment is not None:
            if sorted(assignment) != list(range(current, count)):
                raise MetadataError(
                    f"the assignment must name partitions {current}..{count - 1}, one each"
                )
            why = check_assignment(assignment, set(self.zk.live_brokers()))
            if why is not None:
                raise MetadataError(why)
            added = dict(assignment)
        else:
            rf = len(next(iter(a.partitions.values()), ())) or 1
            added = self.assignment_for(count - current, rf, start_partition=current)
        try:
            self.zk.set_topic_assignment(name, a.topic_id, {**a.partitions, **added}, a.version)
        except ZkError as exc:
            raise MetadataError(str(exc)) from None
        return TopicInfo(name, a.topic_id, count, self.zk.configs.topic_config(name))

    def set_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        a = self.zk.topic(name)
        if a is None:
            raise MetadataError(f"Topic '{name}' does not exist")
        self.zk.configs.set_topic_config(name, dict(configs))
        return TopicInfo(name, a.topic_id, len(a.partitions), dict(configs))

    # -- ACLs: one znode per resource pattern, compare-and-set, then a change notification
    def acls(self) -> list[AclBinding]:
        out: list[AclBinding] = []
        for pattern in self.zk.acls.acl_patterns():
            try:
                entries, _ = self.zk.acls.read_acls(pattern)
            except (ad.AclDataError, ZkDataError) as exc:
                log.error("ignoring unreadable ACLs of %s: %s", pattern, exc)
                continue
            out.extend(AclBinding(pattern, e) for e in entries)
        return out

    def acls_of(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        return self.zk.acls.read_acls(pattern)[0]

    def update_acls(
        self,
        pattern: ResourcePattern,
        add: Collection[AccessControlEntry] = (),
        remove: Collection[AccessControlEntry] = (),
    ) -> set[AccessControlEntry]:
        while True:
            current, version = self.zk.acls.read_acls(pattern)
            entries = (current | set(add)) - set(remove)
            if entries == current:
                return entries
            if self.zk.acls.write_acls(pattern, entries, version):
                return entries

    def watch_acl_changes(self, fn: Callable[[list[ResourcePattern]], None]) -> None:
        """Watch both change paths; `fn` gets the patterns named by notifications newer than the
        ones present when the watch was set (kazoo's thread). Old notifications are purged."""
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            self._watch_changes(pattern_type, fn)

    def _watch_changes(
        self, pattern_type: PatternType, fn: Callable[[list[ResourcePattern]], None]
    ) -> None:
        seen: set[str] | None = None

        def on_children(children: list[str]) -> None:
            nonlocal seen
            if seen is None:
                seen = set(children)
                self.zk.acls.purge_acl_changes(pattern_type, ACL_CHANGE_RETENTION_MS)
                return
            fresh = sorted(c for c in children if c not in seen)
            seen = set(children)
            if fresh:
                fn(self.zk.acls.acl_changes(pattern_type, fresh))

        self.zk.watch_children(ad.change_path(pattern_type), on_children)

    # -- SCRAM credentials: /config/users/<user>, one config key per mechanism, as Kafka writes them
    def scram_credentials(self) -> dict[str, dict[str, ScramCredential]]:
        out: dict[str, dict[str, ScramCredential]] = {}
        for user in self.zk.configs.user_names():
            creds = self.user_scram_credentials(user)
            if creds:
                out[user] = creds
        return out

    def user_scram_credentials(self, user: str) -> dict[str, ScramCredential]:
        config, _ = self.zk.configs.user_config(user)
        out: dict[str, ScramCredential] = {}
        for mech in SCRAM_MECHANISMS:
            text = config.get(mech)
            if text is None:
                continue
            try:
                out[mech] = ScramCredential.from_config_string(text)
            except ValueError as exc:
                log.warning("ignoring the %s credential of user %s: %s", mech, user, exc)
        return out

    def alter_scram_credentials(
        self,
        user: str,
        upsert: Mapping[str, ScramCredential],
        delete: Collection[str] = (),
    ) -> dict[str, ScramCredential]:
        while True:  # compare-and-set: keeps other keys of the user's config (quotas)
            config, version = self.zk.configs.user_config(user)
            for mech in delete:
                config.pop(mech, None)
            config.update({m: c.to_config_string() for m, c in upsert.items()})
            if self.zk.configs.write_user_config(user, config, version):
                return {m: c for m, c in self.user_scram_credentials(user).items()}

    # -- client quotas: Kafka's entity znodes, the quota keys beside any SCRAM credentials
    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        out: dict[QuotaEntity, dict[str, float]] = {}
        for entity in self.zk.configs.quota_entities():
            values = self.entity_client_quotas(entity)
            if values:
                out[entity] = values
        return out

    def entity_client_quotas(self, entity: QuotaEntity) -> dict[str, float]:
        path = zk_data.quota_entity_config_path(entity)
        config, _ = self.zk.configs.entity_config(path)
        try:
            return quotas_from_config(config)
        except QuotaDataError as exc:
            log.warning("ignoring the client quotas in %s: %s", path, exc)
            return {}

    def alter_client_quotas(
        self, entity: QuotaEntity, upsert: Mapping[str, float], remove: Collection[str] = ()
    ) -> dict[str, float]:
        path = zk_data.quota_entity_config_path(entity)
        while True:  # compare-and-set: keeps the entity's other keys (SCRAM credentials)
            config, version = self.zk.configs.entity_config(path)
            new = apply_quota_changes(config, upsert, remove)
            if self.zk.configs.write_entity_config(
                path, zk_data.quota_entity_path(entity), new, version
            ):
                return quotas_from_config(new)
