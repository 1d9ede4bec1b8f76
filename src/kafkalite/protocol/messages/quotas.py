"""Client quota administration (KIP-546): DescribeClientQuotas (48) and AlterClientQuotas (49),
versions 0-1, flexible from 1; an entity name of null means the default entity.
"""

from __future__ import annotations

from kafkalite.protocol.schema import F, api, request, response

# DescribeClientQuotas filter match types
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


def _entity(name: str) -> F:
    return F(
        "entity",
        f"[]{name}",
        "0+",
        fields=[
            F("entity_type", "string", "0+"),
            F("entity_name", "string", "0+", nullable="0+"),
        ],
    )


DescribeClientQuotasRequest = request(
    48,
    "DescribeClientQuotasRequest",
    valid="0-1",
    flexible="1+",
    fields=[
        F(
            "components",
            "[]ComponentData",
            "0+",
            fields=[
                F("entity_type", "string", "0+"),
                F("match_type", "int8", "0+"),
                F("match", "string", "0+", nullable="0+"),
            ],
        ),
        F("strict", "bool", "0+"),
    ],
)

DescribeClientQuotasResponse = response(
    48,
    "DescribeClientQuotasResponse",
    valid="0-1",
    flexible="1+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F(
            "entries",
            "[]EntryData",
            "0+",
            nullable="0+",
            fields=[
                _entity("EntityData"),
                F(
                    "values",
                    "[]ValueData",
                    "0+",
                    fields=[F("key", "string", "0+"), F("value", "float64", "0+")],
                ),
            ],
        ),
    ],
)

DESCRIBE_CLIENT_QUOTAS = api(
    "DescribeClientQuotas", DescribeClientQuotasRequest, DescribeClientQuotasResponse
)

AlterClientQuotasRequest = request(
    49,
    "AlterClientQuotasRequest",
    valid="0-1",
    flexible="1+",
    fields=[
        F(
            "entries",
            "[]EntryData",
            "0+",
            fields=[
                _entity("EntityData"),
                F(
                    "ops",
                    "[]OpData",
                    "0+",
                    fields=[
                        F("key", "string", "0+"),
                        F("value", "float64", "0+"),
                        F("remove", "bool", "0+"),
                    ],
                ),
            ],
        ),
        F("validate_only", "bool", "0+"),
    ],
)

AlterClientQuotasResponse = response(
    49,
    "AlterClientQuotasResponse",
    valid="0-1",
    flexible="1+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "entries",
            "[]EntryData",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+"),
                _entity("EntityData"),
            ],
        ),
    ],
)

ALTER_CLIENT_QUOTAS = api("AlterClientQuotas", AlterClientQuotasRequest, AlterClientQuotasResponse)
