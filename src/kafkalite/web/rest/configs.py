"""Configs through the broker's DescribeConfigs and IncrementalAlterConfigs handlers (their ACL checks,
sources and synonyms), shaped as the REST Proxy's KafkaBrokerConfig / KafkaTopicConfig.
"""

from __future__ import annotations

from aiohttp import web

from kafkalite.broker.apis.admin import describe_configs, incremental_alter_configs
from kafkalite.protocol.messages.admin import (
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
)
from kafkalite.web.rest._base import RestError, bad_request, context

# one config entry of a DescribeConfigs answer
ConfigEntry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult

SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    8: "DYNAMIC_CLIENT_METRICS_CONFIG",
    9: "DYNAMIC_GROUP_CONFIG",
}
OPERATIONS = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}


def source_name(code: int) -> str:
    return SOURCES.get(code, "UNKNOWN")


async def describe(
    request: web.Request, resource_type: int, resource_name: str, names: list[str] | None = None
) -> list[ConfigEntry]:
    """The resource's config entries (DescribeConfigs v4 with synonyms); a Kafka error raises."""
    ctx = context(request, DESCRIBE_CONFIGS, 4)
    req = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=resource_type, resource_name=resource_name, configuration_keys=names
            )
        ],
        include_synonyms=True,
        include_documentation=False,
    )
    resp = await describe_configs.handle(ctx, req)
    result = resp.results[0]
    if result.error_code:
        raise RestError.kafka(result.error_code, result.error_message)
    return list(result.configs)


def entry_fields(entry: ConfigEntry) -> dict[str, object]:
    """The config fields REST v3 shows for one DescribeConfigs entry."""
    return {
        "name": entry.name,
        "value": None if entry.is_sensitive else entry.value,
        "is_default": entry.config_source == 5,
        "is_read_only": bool(entry.read_only),
        "is_sensitive": bool(entry.is_sensitive),
        "source": source_name(entry.config_source),
        "synonyms": [
            {
                "name": s.name,
                "value": None if entry.is_sensitive else s.value,
                "source": source_name(s.source),
            }
            for s in entry.synonyms
        ],
    }


def parse_alterations(body: dict[str, object]) -> list[tuple[str, int, str | None]]:
    """(name, operation, value) of a `configs:alter` body {"data": [{name, value, operation?}]}."""
    data = body.get("data")
    if not isinstance(data, list) or not data:
        raise bad_request("Field data must be a non-empty list of {name, value, operation}")
    out: list[tuple[str, int, str | None]] = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise bad_request("Every entry of data needs a string name")
        op_name = str(item.get("operation") or "SET").upper()
        if op_name not in OPERATIONS:
            raise bad_request(f"Unknown operation {op_name!r} (SET, DELETE, APPEND, SUBTRACT)")
        value = item.get("value")
        if value is not None and not isinstance(value, str):
            value = str(value).lower() if isinstance(value, bool) else str(value)
        if op_name != "DELETE" and value is None:
            raise bad_request(f"Config {item['name']}: {op_name} needs a value")
        out.append((item["name"], OPERATIONS[op_name], value))
    return out


async def alter(
    request: web.Request,
    resource_type: int,
    resource_name: str,
    changes: list[tuple[str, int, str | None]],
    validate_only: bool = False,
) -> None:
    """Apply the changes with IncrementalAlterConfigs; a Kafka error raises."""
    ctx = context(request, INCREMENTAL_ALTER_CONFIGS, 1)
    res_cls = IncrementalAlterConfigsRequest.AlterConfigsResource
    req = IncrementalAlterConfigsRequest(
        resources=[
            res_cls(
                resource_type=resource_type,
                resource_name=resource_name,
                configs=[
                    res_cls.AlterableConfig(name=n, config_operation=op, value=v)
                    for n, op, v in changes
                ],
            )
        ],
        validate_only=validate_only,
    )
    resp = await incremental_alter_configs.handle(ctx, req)
    r = resp.responses[0]
    if r.error_code:
        raise RestError.kafka(r.error_code, r.error_message)
