"""Delegation-token APIs (KIP-48): CreateDelegationToken (38), RenewDelegationToken (39),
ExpireDelegationToken (40) and DescribeDelegationToken (41), versions 0-2 (v2: flexible).
"""

from __future__ import annotations

from kafkalite.protocol.schema import F, api, request, response

_PRINCIPAL = [F("principal_type", "string", "0+"), F("principal_name", "string", "0+")]

CreateDelegationTokenRequest = request(
    38,
    "CreateDelegationTokenRequest",
    valid="0-2",
    flexible="2+",
    fields=[
        F("renewers", "[]CreatableRenewers", "0+", fields=list(_PRINCIPAL)),
        F("max_lifetime_ms", "int64", "0+", default=-1),
    ],
)

CreateDelegationTokenResponse = response(
    38,
    "CreateDelegationTokenResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        F("error_code", "int16", "0+"),
        *_PRINCIPAL,
        F("issue_timestamp_ms", "int64", "0+"),
        F("expiry_timestamp_ms", "int64", "0+"),
        F("max_timestamp_ms", "int64", "0+"),
        F("token_id", "string", "0+"),
        F("hmac", "bytes", "0+"),
        F("throttle_time_ms", "int32", "0+"),
    ],
)

RenewDelegationTokenRequest = request(
    39,
    "RenewDelegationTokenRequest",
    valid="0-2",
    flexible="2+",
    fields=[F("hmac", "bytes", "0+"), F("renew_period_ms", "int64", "0+")],
)

RenewDelegationTokenResponse = response(
    39,
    "RenewDelegationTokenResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        F("error_code", "int16", "0+"),
        F("expiry_timestamp_ms", "int64", "0+"),
        F("throttle_time_ms", "int32", "0+"),
    ],
)

ExpireDelegationTokenRequest = request(
    40,
    "ExpireDelegationTokenRequest",
    valid="0-2",
    flexible="2+",
    fields=[F("hmac", "bytes", "0+"), F("expiry_time_period_ms", "int64", "0+")],
)

ExpireDelegationTokenResponse = response(
    40,
    "ExpireDelegationTokenResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        F("error_code", "int16", "0+"),
        F("expiry_timestamp_ms", "int64", "0+"),
        F("throttle_time_ms", "int32", "0+"),
    ],
)

DescribeDelegationTokenRequest = request(
    41,
    "DescribeDelegationTokenRequest",
    valid="0-2",
    flexible="2+",
    fields=[
        # null: every token the principal may describe
        F(
            "owners",
            "[]DescribeDelegationTokenOwner",
            "0+",
            nullable="0+",
            fields=list(_PRINCIPAL),
        ),
    ],
)

DescribeDelegationTokenResponse = response(
    41,
    "DescribeDelegationTokenResponse",
    valid="0-2",
    flexible="2+",
    fields=[
        F("error_code", "int16", "0+"),
        F(
            "tokens",
            "[]DescribedDelegationToken",
            "0+",
            fields=[
                *_PRINCIPAL,
                F("issue_timestamp", "int64", "0+"),
                F("expiry_timestamp", "int64", "0+"),
                F("max_timestamp", "int64", "0+"),
                F("token_id", "string", "0+"),
                F("hmac", "bytes", "0+"),
                F(
                    "renewers",
                    "[]DescribedDelegationTokenRenewer",
                    "0+",
                    fields=list(_PRINCIPAL),
                ),
            ],
        ),
        F("throttle_time_ms", "int32", "0+"),
    ],
)

CREATE_DELEGATION_TOKEN = api(
    "CreateDelegationToken", CreateDelegationTokenRequest, CreateDelegationTokenResponse
)
RENEW_DELEGATION_TOKEN = api(
    "RenewDelegationToken", RenewDelegationTokenRequest, RenewDelegationTokenResponse
)
EXPIRE_DELEGATION_TOKEN = api(
    "ExpireDelegationToken", ExpireDelegationTokenRequest, ExpireDelegationTokenResponse
)
DESCRIBE_DELEGATION_TOKEN = api(
    "DescribeDelegationToken", DescribeDelegationTokenRequest, DescribeDelegationTokenResponse
)
