"""IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT on individual topic config overrides.

List-typed configs (cleanup.policy) take APPEND and SUBTRACT; others only SET and DELETE.
"""

from __future__ import annotations

from typing import Any

from kafkalite.broker.apis.alter_configs import alter_topic, refuse_other
from kafkalite.broker.context import RequestContext
from kafkalite.broker.topic_configs import RESOURCE_TOPIC
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    INCREMENTAL_ALTER_CONFIGS,
    IncrementalAlterConfigsResponse,
)
from kafkalite.storage.config import TOPIC_CONFIG_TYPES

API = INCREMENTAL_ALTER_CONFIGS
_Resp = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _apply(current: dict[str, str], configs: list[Any]) -> tuple[dict[str, str] | None, str | None]:
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
            if TOPIC_CONFIG_TYPES.get(c.name) != "list":
                return None, f"Config {c.name} is not a list; APPEND/SUBTRACT need one"
            items = [x for x in new.get(c.name, "").split(",") if x]
            vals = [x.strip() for x in (c.value or "").split(",") if x.strip()]
            if op == APPEND:
                items += [x for x in vals if x not in items]
            else:
                items = [x for x in items if x not in vals]
            new[c.name] = ",".join(items)
        else:
            return None, f"Unknown config operation {op}"
    return new, None


async def handle(ctx: RequestContext, request: Any) -> Any:
    out = []
    code: int
    msg: str | None
    for res in request.resources:
        if res.resource_type == RESOURCE_TOPIC:
            info = ctx.broker.metadata.get(res.resource_name)
            if info is None:
                code, msg = (
                    int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    f"Topic '{res.resource_name}' does not exist",
                )
            else:
                new, err = _apply(info.configs, res.configs)
                if new is None:
                    code, msg = int(ErrorCode.INVALID_CONFIG), err
                else:
                    code, msg = alter_topic(ctx, res.resource_name, new, request.validate_only)
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
