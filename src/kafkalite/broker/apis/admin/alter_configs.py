"""AlterConfigs (key 33): replace a topic's or a group's overrides or a broker's dynamic configs (legacy API).

BROKER "" is the cluster-wide default, BROKER "<id>" this broker; only dynamic `log.*` defaults may change.
"""

from __future__ import annotations

import logging

from kafkalite.broker.config.dynamic_config import alter_broker
from kafkalite.broker.config.topic_configs import (
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    apply_topic_overrides,
    check_topic_overrides,
    config_access_denied,
)
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    ALTER_CONFIGS,
    AlterConfigsRequest,
    AlterConfigsResponse,
)
from kafkalite.security.acl import AclOperation

API = ALTER_CONFIGS
log = logging.getLogger("kafkalite.broker.alter_configs")
_Resp = AlterConfigsResponse.AlterConfigsResourceResponse


def alter_topic(
    ctx: RequestContext, name: str, new: dict[str, str], validate_only: bool
) -> tuple[int, str | None]:
    broker = ctx.broker
    info = broker.metadata_store.get(name)
    if info is None:
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"Topic '{name}' does not exist"
    why = check_topic_overrides(broker, new)
    if why is not None:
        return int(ErrorCode.INVALID_CONFIG), why
    if not validate_only:
        apply_topic_overrides(broker, name, new)
        log.info("topic %s configs now %s (by %s)", name, new, ctx.client_id)
    return 0, None


async def alter_group(
    ctx: RequestContext, res: AlterConfigsRequest.AlterConfigsResource, validate_only: bool
) -> tuple[int, str | None]:
    """Replace a group's overrides as a whole (Kafka: each name once, no null values)."""
    names = [c.name for c in res.configs]
    if len(set(names)) != len(names):
        return int(ErrorCode.INVALID_REQUEST), "Error due to duplicate config keys"
    nulls = [c.name for c in res.configs if c.value is None]
    if nulls:
        return (
            int(ErrorCode.INVALID_CONFIG),
            f"Null value not supported for group configs: {','.join(nulls)}",
        )
    new = {c.name: c.value for c in res.configs if c.value is not None}
    return await ctx.broker.group_configs.alter(
        res.resource_name, lambda _current: (new, None), validate_only
    )


def refuse_other(resource_type: int) -> tuple[int, str]:
    return int(ErrorCode.INVALID_REQUEST), f"Unsupported resource type {resource_type}"


def request_shape_error(names: list[str], nulls: list[str]) -> tuple[int, str] | None:
    """Kafka's checks before a broker config change: each name once, no null values."""
    if len(set(names)) != len(names):
        return int(ErrorCode.INVALID_REQUEST), "Error due to duplicate config keys"
    if nulls:
        return int(ErrorCode.INVALID_REQUEST), f"Null value not supported for : {', '.join(nulls)}"
    return None


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    out = []
    code: int
    msg: str | None
    for res in request.resources:
        denied = config_access_denied(
            ctx, AclOperation.ALTER_CONFIGS, res.resource_type, res.resource_name
        )
        if denied is not None:
            code, msg = denied
        elif res.resource_type == RESOURCE_TOPIC:
            new = {c.name: c.value for c in res.configs if c.value is not None}
            code, msg = alter_topic(ctx, res.resource_name, new, request.validate_only)
        elif res.resource_type == RESOURCE_BROKER:
            names = [c.name for c in res.configs]
            bad = request_shape_error(names, [c.name for c in res.configs if c.value is None])
            if bad is not None:
                code, msg = bad
            else:
                new = {c.name: c.value for c in res.configs if c.value is not None}
                code, msg = alter_broker(ctx.broker, res.resource_name, new, request.validate_only)
        elif res.resource_type == RESOURCE_GROUP:
            code, msg = await alter_group(ctx, res, request.validate_only)
        else:
            code, msg = refuse_other(res.resource_type)
        out.append(
            _Resp(
                error_code=code,
                error_message=msg,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    return AlterConfigsResponse(throttle_time_ms=0, responses=out)
