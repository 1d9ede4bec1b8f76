"""IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT on topic and group overrides and broker configs.

List-typed configs take APPEND and SUBTRACT from their value or else their default; others get INVALID_CONFIG.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafkalite.broker.apis.admin.alter_configs import alter_topic, refuse_other, request_shape_error
from kafkalite.broker.config.broker_config import BROKER_CONFIGS, T_LIST
from kafkalite.broker.config.dynamic_config import (
    DynamicConfigError,
    alter_broker,
    check_broker_resource,
    dynamic_configs,
)
from kafkalite.broker.config.group_config_defs import GROUP_CONFIG_DEFS
from kafkalite.broker.config.log_config import ROOT, LogLevelError, level_of, set_level
from kafkalite.broker.config.topic_configs import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    config_access_denied,
)
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    INCREMENTAL_ALTER_CONFIGS,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafkalite.security.acl import AclOperation
from kafkalite.storage.config import TOPIC_CONFIG_DEFAULTS, TOPIC_CONFIG_TYPES

API = INCREMENTAL_ALTER_CONFIGS
_Resp = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


log = logging.getLogger("kafkalite.broker.configs")


def _is_topic_list(name: str) -> bool:
    return TOPIC_CONFIG_TYPES.get(name) == "list"


def _is_broker_list(name: str) -> bool:
    defn = BROKER_CONFIGS.get(name)
    return defn is not None and defn.type == T_LIST


def _apply(
    current: dict[str, str],
    configs: list[IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig],
    is_list: Callable[[str], bool] = _is_topic_list,
    list_default: Callable[[str], str | None] | None = None,
) -> tuple[dict[str, str] | None, str | None]:
    new = dict(current)
    for c in configs:
        op = c.config_operation
        if op == SET:
            if c.value is None:
                return None, f"SET of {c.name} needs a value"
            new[c.name] = c.value
        elif op == DELETE:
            new.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            if not is_list(c.name):
                kind = "APPEND" if op == APPEND else "SUBTRACT"
                return None, f"Can't {kind} to key {c.name} because its type is not LIST."
            start = new.get(c.name)
            if start is None:
                start = (list_default(c.name) if list_default is not None else None) or ""
            items = [x.strip() for x in start.split(",") if x.strip()]
            vals = [x.strip() for x in (c.value or "").split(",") if x.strip()]
            if op == APPEND:
                items += [x for x in vals if x not in items]
            else:
                items = [x for x in items if x not in vals]
            new[c.name] = ",".join(items)
        else:
            return None, f"Unknown config operation {op}"
    return new, None


def _broker_list_default(name: str) -> str | None:
    defn = BROKER_CONFIGS.get(name)
    return defn.default if defn is not None else None


def alter_broker_incremental(
    ctx: RequestContext,
    res: IncrementalAlterConfigsRequest.AlterConfigsResource,
    validate_only: bool,
) -> tuple[int, str | None]:
    """Edit the resource's dynamic set (per-broker or cluster default) op by op, then replace it."""
    names = [c.name for c in res.configs]
    nulls = [c.name for c in res.configs if c.value is None and c.config_operation != DELETE]
    bad = request_shape_error(names, nulls)
    if bad is not None:
        return bad
    try:
        check_broker_resource(ctx.broker, res.resource_name)
    except DynamicConfigError as exc:
        return exc.code, exc.message
    current = dynamic_configs(ctx.broker).layer(res.resource_name != "")
    new, err = _apply(current, res.configs, _is_broker_list, _broker_list_default)
    if new is None:
        return int(ErrorCode.INVALID_CONFIG), err
    return alter_broker(ctx.broker, res.resource_name, new, validate_only)


async def alter_group_incremental(
    ctx: RequestContext,
    res: IncrementalAlterConfigsRequest.AlterConfigsResource,
    validate_only: bool,
) -> tuple[int, str | None]:
    """SET / DELETE on a group's overrides, checked as a whole; no group config is a list."""
    names = [c.name for c in res.configs]
    if len(set(names)) != len(names):
        return int(ErrorCode.INVALID_REQUEST), "Error due to duplicate config keys"
    unknown = sorted(n for n in names if n not in GROUP_CONFIG_DEFS)
    if unknown:  # DELETE of a name that is no group config is refused too, as in Kafka
        return (
            int(ErrorCode.INVALID_CONFIG),
            f"Unknown group config name: {unknown[0]} "
            f"(group configs: {', '.join(sorted(GROUP_CONFIG_DEFS))})",
        )
    return await ctx.broker.group_configs.alter(
        res.resource_name,
        lambda current: _apply(current, res.configs, lambda _name: False),
        validate_only,
    )


def alter_broker_loggers(
    ctx: RequestContext,
    res: IncrementalAlterConfigsRequest.AlterConfigsResource,
    validate_only: bool,
) -> tuple[int, str | None]:
    """SET (a level) / DELETE (follow the parent) on this broker's loggers, checked as a whole:
    Kafka's BROKER_LOGGER resource, e.g. kafka.request.logger=DEBUG for request logging."""
    if res.resource_name != str(ctx.broker.broker_id):
        return (
            int(ErrorCode.INVALID_REQUEST),
            f"Unexpected broker id, expected {ctx.broker.broker_id} but received "
            f"{res.resource_name or '(none)'}",
        )
    changes: list[tuple[str, str | None]] = []
    for c in res.configs:
        if c.config_operation == 0:
            if c.value is None:
                return int(ErrorCode.INVALID_CONFIG), f"no level given for logger {c.name}"
            changes.append((c.name, c.value))
        elif c.config_operation == 1:
            changes.append((c.name, None))
        else:
            return (
                int(ErrorCode.INVALID_REQUEST),
                f"{c.name}: only SET and DELETE apply to a logger's level",
            )
    try:
        for name, level in changes:
            if level is not None:
                level_of(level)
            if name == ROOT and level is None:
                raise LogLevelError("the root logger's level cannot be removed, only set")
    except LogLevelError as exc:
        return int(ErrorCode.INVALID_CONFIG), str(exc)
    if not validate_only:
        for name, level in changes:
            set_level(name, level)
            log.info("logger %s set to %s", name, level or "its parent's level")
    return 0, None


async def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
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
            info = ctx.broker.metadata_store.get(res.resource_name)
            if info is None:
                code, msg = (
                    int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    f"Topic '{res.resource_name}' does not exist",
                )
            else:
                new, err = _apply(info.configs, res.configs, list_default=TOPIC_CONFIG_DEFAULTS.get)
                if new is None:
                    code, msg = int(ErrorCode.INVALID_CONFIG), err
                else:
                    code, msg = alter_topic(ctx, res.resource_name, new, request.validate_only)
        elif res.resource_type == RESOURCE_BROKER:
            code, msg = alter_broker_incremental(ctx, res, request.validate_only)
        elif res.resource_type == RESOURCE_GROUP:
            code, msg = await alter_group_incremental(ctx, res, request.validate_only)
        elif res.resource_type == RESOURCE_BROKER_LOGGER:
            code, msg = alter_broker_loggers(ctx, res, request.validate_only)
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
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)
