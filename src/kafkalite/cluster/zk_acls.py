"""ZkAcls: ACLs in AclAuthorizer's ZooKeeper layout — a znode per resource pattern under /kafka-acl (and
/kafka-acl-extended for prefixed ones), written by compare-and-set, and the change notifications after each write.
"""

from __future__ import annotations

import logging
import time

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
)

from kafkalite.cluster import acl_data as ad
from kafkalite.security.acl import AccessControlEntry, PatternType, ResourcePattern

log = logging.getLogger("kafkalite.cluster.zk")


class ZkAcls:
    """The ACL znodes and their change notifications, through a connected kazoo client."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def acl_patterns(self) -> list[ResourcePattern]:
        """Every resource pattern that has a znode under /kafka-acl or /kafka-acl-extended/prefixed."""
        out: list[ResourcePattern] = []
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            root = ad.pattern_root(pattern_type)
            for resource_type in ad.STORED_RESOURCE_TYPES:
                try:
                    names = self.zk.get_children(f"{root}/{ad.camel(resource_type.name)}")
                except NoNodeError:
                    continue
                out.extend(ResourcePattern(resource_type, n, pattern_type) for n in names)
        return out

    def read_acls(self, pattern: ResourcePattern) -> tuple[set[AccessControlEntry], int]:
        """The entries of one pattern and its znode version (-1: no znode)."""
        path = ad.resource_path(pattern)
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return set(), -1
        return ad.decode_acls(path, data), int(stat.version)

    def write_acls(
        self, pattern: ResourcePattern, entries: set[AccessControlEntry], version: int
    ) -> bool:
        """Compare-and-set of one pattern's znode (created at version -1, deleted when `entries` is
        empty); False when another writer got there first. A change notification follows a write."""
        path = ad.resource_path(pattern)
        try:
            if not entries:
                if version >= 0:
                    self.zk.delete(path, version=version)
            elif version < 0:
                self.zk.create(path, ad.encode_acls(entries), makepath=True)
            else:
                self.zk.set(path, ad.encode_acls(entries), version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False
        self.zk.create(
            f"{ad.change_path(pattern.pattern_type)}/{ad.CHANGE_PREFIX}",
            ad.encode_change(pattern),
            sequence=True,
            makepath=True,
        )
        return True

    def acl_changes(self, pattern_type: PatternType, names: list[str]) -> list[ResourcePattern]:
        """The patterns these notifications (children of the change path) name; vanished or
        unreadable notifications are skipped."""
        out: list[ResourcePattern] = []
        root = ad.change_path(pattern_type)
        for name in names:
            try:
                data, _ = self.zk.get(f"{root}/{name}")
                out.append(ad.decode_change(pattern_type, data))
            except NoNodeError:
                continue
            except (ad.AclDataError, ValueError) as exc:
                log.warning("ignoring ACL change %s/%s: %s", root, name, exc)
        return out

    def purge_acl_changes(self, pattern_type: PatternType, older_than_ms: int) -> None:
        """Delete notifications older than `older_than_ms` (Kafka keeps them 15 minutes)."""
        root = ad.change_path(pattern_type)
        cutoff = time.time() * 1000 - older_than_ms
        try:
            names = self.zk.get_children(root)
        except NoNodeError:
            return
        for name in names:
            try:
                stat = self.zk.exists(f"{root}/{name}")
                if stat is not None and stat.ctime < cutoff:
                    self.zk.delete(f"{root}/{name}")
            except NoNodeError:
                continue
