"""DescribeConfigs (key 32): topic, broker and group configs with their sources, synonyms, types and docs.

Topic values come from overrides, then dynamic and static broker `log.*` settings, then built-in defaults.
"""

from __future__ import annotations

from kafkalite.broker.config.config_defs import is_sensitive_config
from kafkalite.broker.config.config_types import SOURCE_BROKER_LOGGER, T_STRING
from kafkalite.broker.config.log_config import known_loggers, level_name
from kafkalite.broker.config.topic_configs import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    ConfigEntry,
    broker_entries,
    config_access_denied,
    topic_entries,
)
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    DESCRIBE_CONFIGS,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from kafkalite.security.acl import AclOperation

API = DESCRIBE_CONFIGS
_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Syn = _Entry.DescribeConfigsSynonym


def _broker_name_error(broker_id: int, name: str) -> str | None:
    if name == "":
        return None
    try:
        node = int(name)
    except ValueError:
        return f"Broker id must be an integer, but it is: {name}"
    if node != broker_id:
        return f"Unexpected broker id, expected {broker_id} or empty string, but received {name}"
    return None


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    broker = ctx.broker
    v = ctx.api_version
    synonyms = v >= 1 and request.include_synonyms
    docs = v >= 3 and request.include_documentation
    results = []
    for res in request.resources:
        r = _Result(
            error_code=0,
            error_message=None,
            resource_type=res.resource_type,
            resource_name=res.resource_name,
            configs=[],
        )
        results.append(r)
        denied = config_access_denied(
            ctx, AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name
        )
        if denied is not None:
            r.error_code, r.error_message = denied
            continue
        if res.resource_type == RESOURCE_TOPIC:
            info = broker.metadata_store.get(res.resource_name)
            if info is None:
                r.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                r.error_message = f"Topic '{res.resource_name}' does not exist"
                continue
            entries = topic_entries(broker, info.configs)
        elif res.resource_type == RESOURCE_BROKER:
            why = _broker_name_error(broker.broker_id, res.resource_name)
            if why is not None:
                r.error_code = int(ErrorCode.INVALID_REQUEST)
                r.error_message = why
                continue
            entries = broker_entries(broker, res.resource_name)
        elif res.resource_type == RESOURCE_BROKER_LOGGER:
            why = _broker_name_error(broker.broker_id, res.resource_name)
            if why is not None or not res.resource_name:
                r.error_code = int(ErrorCode.INVALID_REQUEST)
                r.error_message = why or "BROKER_LOGGER needs a broker id"
                continue
            entries = [
                ConfigEntry(
                    name, level_name(level), SOURCE_BROKER_LOGGER, False, T_STRING, None, []
                )
                for name, level in known_loggers().items()
            ]
        elif res.resource_type == RESOURCE_GROUP:
            if not res.resource_name:
                r.error_code = int(ErrorCode.INVALID_REQUEST)
                r.error_message = "Group name must not be empty"
                continue
            entries = broker.group_configs.describe(res.resource_name)
        else:
            r.error_code = int(ErrorCode.INVALID_REQUEST)
            r.error_message = f"Unsupported resource type {res.resource_type}"
            continue
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        for e in entries:
            if keys is not None and e.name not in keys:
                continue
            r.configs.append(
                _Entry(
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    config_source=e.source,
                    is_default=e.source == 5 and v == 0,
                    is_sensitive=is_sensitive_config(e.name),
                    synonyms=[_Syn(name=n, value=val, source=s) for n, val, s in e.synonyms]
                    if synonyms
                    else [],
                    config_type=e.config_type,
                    documentation=e.doc if docs else None,
                )
            )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
