"""ApiVersions (key 18), versions 0-4: the version negotiation every client starts with.

v3+ is flexible and carries client software name/version and tagged feature fields (KIP-511, KIP-584).
"""

from __future__ import annotations

from kafkalite.protocol.schema import F, api, request, response

ApiVersionsRequest = request(
    18,
    "ApiVersionsRequest",
    valid="0-4",
    flexible="3+",
    fields=[
        F("client_software_name", "string", "3+"),
        F("client_software_version", "string", "3+"),
    ],
)

ApiVersionsResponse = response(
    18,
    "ApiVersionsResponse",
    valid="0-4",
    flexible="3+",
    fields=[
        F("error_code", "int16", "0+"),
        F(
            "api_keys",
            "[]ApiVersion",
            "0+",
            fields=[
                F("api_key", "int16", "0+"),
                F("min_version", "int16", "0+"),
                F("max_version", "int16", "0+"),
            ],
        ),
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F(
            "supported_features",
            "[]SupportedFeatureKey",
            "3+",
            tag=0,
            tagged="3+",
            ignorable=True,
            fields=[
                F("name", "string", "3+"),
                F("min_version", "int16", "3+"),
                F("max_version", "int16", "3+"),
            ],
        ),
        F(
            "finalized_features_epoch",
            "int64",
            "3+",
            tag=1,
            tagged="3+",
            default=-1,
            ignorable=True,
        ),
        F(
            "finalized_features",
            "[]FinalizedFeatureKey",
            "3+",
            tag=2,
            tagged="3+",
            ignorable=True,
            fields=[
                F("name", "string", "3+"),
                F("max_version_level", "int16", "3+"),
                F("min_version_level", "int16", "3+"),
            ],
        ),
        F("zk_migration_ready", "bool", "3+", tag=3, tagged="3+", ignorable=True),
    ],
)

API_VERSIONS = api("ApiVersions", ApiVersionsRequest, ApiVersionsResponse)
