"""ZkConfigs: the /config znodes in Kafka's layout — topic, user, client, ip and group configs, each written by
compare-and-set with a /config/changes notification every broker watches — and those notifications.
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
)

from kafkalite.cluster import zk_data as zd
from kafkalite.security.quota import QuotaEntity

log = logging.getLogger("kafkalite.cluster.zk")


def znode_children(zk: KazooClient, path: str) -> list[str]:
    """The children of `path`, none when it is absent."""
    try:
        return list(zk.get_children(path))
    except NoNodeError:
        return []


class ZkConfigs:
    """The /config subtree, read and written through a connected kazoo client."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def topic_config(self, name: str) -> dict[str, str]:
        path = zd.topic_config_path(name)
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return {}
        return zd.decode_config(path, data)

    def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        path = zd.topic_config_path(name)
        try:
            self.zk.set(path, zd.encode_config(config))
        except NoNodeError:
            self.zk.create(path, zd.encode_config(config), makepath=True)
        self.zk.create(
            f"{zd.CONFIG_CHANGES}/config_change_",
            zd.encode_config_change(f"topics/{name}"),
            sequence=True,
            makepath=True,
        )

    def config_changes(self) -> set[str]:
        """The names of the /config/changes notifications present now."""
        try:
            return set(self.zk.get_children(zd.CONFIG_CHANGES))
        except NoNodeError:
            return set()

    def config_change_entities(self, changes: list[str]) -> list[str]:
        """The entity paths ("topics/<t>", "users/<u>", ...) these /config/changes notifications name."""
        out: list[str] = []
        for name in changes:
            path = f"{zd.CONFIG_CHANGES}/{name}"
            try:
                data, _ = self.zk.get(path)
                out.append(zd.decode_config_change(path, data))
            except NoNodeError:
                continue
            except zd.ZkDataError as exc:
                log.warning("ignoring config change: %s", exc)
        return out

    # -- /config/users/<user> (SCRAM credentials, as kafka-configs --entity-type users writes them)
    def user_names(self) -> list[str]:
        try:
            return [zd.desanitize_entity_name(c) for c in self.zk.get_children(zd.CONFIG_USERS)]
        except NoNodeError:
            return []

    def user_config(self, user: str) -> tuple[dict[str, str], int]:
        """The config of a user and its znode version (-1: no znode)."""
        return self.entity_config(zd.user_config_path(user))

    def write_user_config(self, user: str, config: dict[str, str], version: int) -> bool:
        """Compare-and-set of /config/users/<user> (version -1: create), then the change
        notification every broker watches; False when another writer got there first."""
        path = zd.user_config_path(user)
        return self.write_entity_config(path, path.removeprefix("/config/"), config, version)

    def entity_config(self, path: str) -> tuple[dict[str, str], int]:
        """The config under a /config/... entity znode and its version (-1: no znode)."""
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return {}, -1
        return zd.decode_config(path, data), stat.version

    def write_entity_config(
        self, path: str, entity_path: str, config: dict[str, str], version: int
    ) -> bool:
        """Compare-and-set of an entity's config znode (version -1: create), then the
        /config/changes notification naming `entity_path`; False when another writer won."""
        try:
            if version < 0:
                self.zk.create(path, zd.encode_config(config), makepath=True)
            else:
                self.zk.set(path, zd.encode_config(config), version=version)
        except (NodeExistsError, BadVersionError):
            return False
        self.zk.create(
            f"{zd.CONFIG_CHANGES}/config_change_",
            zd.encode_config_change(entity_path),
            sequence=True,
            makepath=True,
        )
        return True

    # -- per-group configs: /config/groups/<group id>
    def group_config_ids(self) -> list[str]:
        """The groups that have a config znode."""
        try:
            return [zd.desanitize_entity_name(c) for c in self.zk.get_children(zd.CONFIG_GROUPS)]
        except NoNodeError:
            return []

    def group_config(self, group_id: str) -> tuple[dict[str, str], int]:
        """A group's configs and the znode's version (-1: no znode)."""
        return self.entity_config(zd.group_config_path(group_id))

    def write_group_config(self, group_id: str, config: dict[str, str], version: int) -> bool:
        """Compare-and-set of /config/groups/<group id> (version -1: create), then the change
        notification every broker watches; False when another writer got there first."""
        path = zd.group_config_path(group_id)
        return self.write_entity_config(path, zd.group_entity_path(group_id), config, version)

    def quota_entities(self) -> list[QuotaEntity]:
        """Every entity znode that may hold quotas (some hold only SCRAM credentials)."""
        out: list[QuotaEntity] = []
        for u in znode_children(self.zk, zd.CONFIG_USERS):
            user = zd.desanitize_entity_name(u)
            out.append(QuotaEntity(user, None))
            for c in znode_children(self.zk, f"{zd.CONFIG_USERS}/{u}/clients"):
                out.append(QuotaEntity(user, zd.desanitize_entity_name(c)))
        for c in znode_children(self.zk, zd.CONFIG_CLIENTS):
            out.append(QuotaEntity(None, zd.desanitize_entity_name(c)))
        for ip in znode_children(self.zk, zd.CONFIG_IPS):
            out.append(QuotaEntity(ip=zd.desanitize_entity_name(ip)))
        return out
