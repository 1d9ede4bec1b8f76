"""The broker's authorizer: Kafka's ACL decisions (security.acl) over an in-memory AclIndex kept in step
with the metadata store (the data dir's ACL file, or ZooKeeper with change notifications), and the ACL
writes of CreateAcls / DeleteAcls. Off unless `authorizer.class.name` names one of Kafka's authorizers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.cluster.metadata import MetadataStore
from kafkalite.cluster.zk import asyncio_callback
from kafkalite.security.acl import (
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclIndex,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    authorize,
)
from kafkalite.security.principal import WILDCARD_PRINCIPAL, KafkaPrincipal

log = logging.getLogger("kafkalite.broker.authorizer")

AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
)


def parse_super_users(text: str) -> frozenset[KafkaPrincipal]:
    """`User:a;User:b` -> principals (blank items skipped; a malformed one fails startup)."""
    out: set[KafkaPrincipal] = set()
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        try:
            out.add(KafkaPrincipal.parse(item))
        except ValueError as exc:
            raise ConfigError(f"super.users: {exc}") from None
    return frozenset(out)


class Authorizer:
    """Decisions are synchronous reads of the index (cheap, on the event loop); ACL writes go to
    the metadata store off the loop, then into the index; other brokers' writes arrive as change
    notifications and reload the patterns they name."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        super_users: frozenset[KafkaPrincipal] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.index = AclIndex()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._write_lock = asyncio.Lock()

    @classmethod
    def from_config(cls, config: BrokerConfig, store: MetadataStore) -> Authorizer | None:
        """None when `authorizer.class.name` is empty; ConfigError for a class kafkalite is not."""
        name = str(config.get("authorizer.class.name") or "").strip()
        if not name:
            return None
        if name not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(
                f"authorizer.class.name={name}: kafkalite's authorizer stands in for "
                f"{', '.join(sorted(AUTHORIZER_CLASS_NAMES))}; other authorizers are not supported"
            )
        return cls(
            store,
            super_users=parse_super_users(str(config.get("super.users") or "")),
            allow_everyone_if_no_acl_found=bool(config.get("allow.everyone.if.no.acl.found")),
        )

    async def start(self) -> None:
        """Watch for other writers first, then load every ACL, so no change falls between."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(
            self.store.watch_acl_changes, asyncio_callback(self._loop, self._on_changes)
        )
        bindings = await asyncio.to_thread(self.store.acls)
        self.index = AclIndex(bindings)
        log.info(
            "ACL authorizer on: %d ACLs, %d super users, allow.everyone.if.no.acl.found=%s",
            len(self.index),
            len(self.super_users),
            self.allow_everyone_if_no_acl_found,
        )

    # -- decisions
    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        allowed = authorize(
            self.index,
            principal,
            host,
            operation,
            resource_type,
            name,
            super_users=self.super_users,
            allow_everyone_if_no_acl_found=self.allow_everyone_if_no_acl_found,
        )
        if not allowed:
            log.debug(
                "Principal = %s is Denied Operation = %s from host = %s on resource = %s:%s",
                principal,
                operation.name,
                host,
                resource_type.name,
                name,
            )
        return allowed

    def authorize_any(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Kafka's authorizeByResourceType: may the principal do `operation` on at least one
        resource of this type? An ALLOW on some pattern that no DENY of the principal on `*` or a
        broader pattern cancels (a simplification: DENYs on other literal names do not count)."""
        if principal in self.super_users:
            return True
        principals = (str(principal), str(WILDCARD_PRINCIPAL))
        ops = (operation, AclOperation.ALL)
        hosts = (host, WILDCARD_HOST)

        def applies(e: AccessControlEntry, perm: AclPermissionType) -> bool:
            return (
                e.permission_type is perm
                and e.principal in principals
                and e.operation in ops
                and e.host in hosts
            )

        bindings = [b for b in self.index if b.pattern.resource_type is resource_type]
        if not bindings:
            return self.allow_everyone_if_no_acl_found
        if any(
            b.pattern.name == "*" and applies(b.entry, AclPermissionType.DENY) for b in bindings
        ):
            return False
        return any(applies(b.entry, AclPermissionType.ALLOW) for b in bindings)

    # -- ACL administration
    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return self.index.describe(binding_filter)

    async def create(self, bindings: Iterable[AclBinding]) -> None:
        """Store bindings (validated by the caller), grouped by pattern, and index them."""
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        async with self._write_lock:
            for pattern, entries in by_pattern.items():
                stored = await asyncio.to_thread(self.store.update_acls, pattern, entries, ())
                self._replace(pattern, stored)

    async def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (a binding counts for the first filter matching it)."""
        async with self._write_lock:
            results: list[list[AclBinding]] = []
            taken: set[AclBinding] = set()
            for f in filters:
                matched = [b for b in self.index.describe(f) if b not in taken]
                taken.update(matched)
                results.append(matched)
            by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
            for b in taken:
                by_pattern.setdefault(b.pattern, set()).add(b.entry)
            for pattern, entries in by_pattern.items():
                stored = await asyncio.to_thread(self.store.update_acls, pattern, (), entries)
                self._replace(pattern, stored)
            return results

    # -- keeping in step
    def _replace(self, pattern: ResourcePattern, entries: set[AccessControlEntry]) -> None:
        current = {
            b.entry
            for b in self.index.describe(
                AclBindingFilter(
                    ResourcePatternFilter(pattern.resource_type, pattern.name, pattern.pattern_type)
                )
            )
        }
        for e in current - entries:
            self.index.remove(AclBinding(pattern, e))
        for e in entries - current:
            self.index.add(AclBinding(pattern, e))

    def _on_changes(self, patterns: list[ResourcePattern]) -> None:
        if patterns and self._loop is not None:
            self._loop.create_task(self._reload(patterns))

    async def _reload(self, patterns: list[ResourcePattern]) -> None:
        for pattern in dict.fromkeys(patterns):
            try:
                entries = await asyncio.to_thread(self.store.acls_of, pattern)
            except Exception:
                log.exception("cannot reload the ACLs of %s", pattern)
                continue
            self._replace(pattern, entries)
            log.info("ACLs of %s reloaded: %d entries", pattern, len(entries))
