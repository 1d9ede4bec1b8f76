"""What the share-group offset APIs (90-92) share: finding the share group on its coordinator with the
group ACL, and making a share-partition this broker leads reload its state after an offset change.
"""

from __future__ import annotations

import uuid

from kafkalite.broker.context import RequestContext
from kafkalite.broker.coordinators import groups as _groups
from kafkalite.coordinator.share_groups import ShareGroupLookup
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import AclOperation, ResourceType

E = ErrorCode
NO_TOPIC_ID = uuid.UUID(int=0)


def lookup(
    ctx: RequestContext,
    group_id: str,
    operation: AclOperation,
    *,
    require_empty: bool = False,
    create: bool = False,
) -> ShareGroupLookup:
    """The share group, or GROUP_AUTHORIZATION_FAILED, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP."""
    if not ctx.authorize(operation, ResourceType.GROUP, group_id):
        return ShareGroupLookup(E.GROUP_AUTHORIZATION_FAILED)
    coord = _groups.coordinator_of(ctx)
    if coord is None:
        return ShareGroupLookup(E.COORDINATOR_NOT_AVAILABLE)
    if not coord.is_coordinator_for(group_id):
        return ShareGroupLookup(E.NOT_COORDINATOR)
    return coord.share_group_lookup(group_id, require_empty=require_empty, create=create)


def leader_epoch(ctx: RequestContext, topic: str, partition: int) -> int:
    meta = ctx.broker.metadata_cache.partition(topic, partition)
    return meta.leader_epoch if meta is not None else -1


def reload_share_partition(
    ctx: RequestContext, group_id: str, topic_id: uuid.UUID, partition: int
) -> None:
    """Forget the loaded share-partition so its next use reads the stored state again. A leader on
    another broker finds out on its next state write, fenced by the bumped state epoch, after which
    SharePartitionManager drops and reloads it the same way."""
    ctx.broker.share_partitions.partitions.pop((group_id, topic_id, partition), None)
