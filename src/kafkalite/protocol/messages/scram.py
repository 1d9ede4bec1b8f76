"""SCRAM credential administration (KIP-554): DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51), version 0, flexible; mechanisms travel as int8 (1 SHA-256, 2 SHA-512).
"""

from __future__ import annotations

from kafkalite.protocol.schema import F, api, request, response

# Kafka's ScramMechanism type ids on the wire
SCRAM_MECHANISM_IDS: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}

DescribeUserScramCredentialsRequest = request(
    50,
    "DescribeUserScramCredentialsRequest",
    valid="0",
    flexible="0+",
    fields=[
        F("users", "[]UserName", "0+", nullable="0+", fields=[F("name", "string", "0+")]),
    ],
)

DescribeUserScramCredentialsResponse = response(
    50,
    "DescribeUserScramCredentialsResponse",
    valid="0",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F(
            "results",
            "[]DescribeUserScramCredentialsResult",
            "0+",
            fields=[
                F("user", "string", "0+"),
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+"),
                F(
                    "credential_infos",
                    "[]CredentialInfo",
                    "0+",
                    fields=[F("mechanism", "int8", "0+"), F("iterations", "int32", "0+")],
                ),
            ],
        ),
    ],
)

DESCRIBE_USER_SCRAM_CREDENTIALS = api(
    "DescribeUserScramCredentials",
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

AlterUserScramCredentialsRequest = request(
    51,
    "AlterUserScramCredentialsRequest",
    valid="0",
    flexible="0+",
    fields=[
        F(
            "deletions",
            "[]ScramCredentialDeletion",
            "0+",
            fields=[F("name", "string", "0+"), F("mechanism", "int8", "0+")],
        ),
        F(
            "upsertions",
            "[]ScramCredentialUpsertion",
            "0+",
            fields=[
                F("name", "string", "0+"),
                F("mechanism", "int8", "0+"),
                F("iterations", "int32", "0+"),
                F("salt", "bytes", "0+"),
                F("salted_password", "bytes", "0+"),
            ],
        ),
    ],
)

AlterUserScramCredentialsResponse = response(
    51,
    "AlterUserScramCredentialsResponse",
    valid="0",
    flexible="0+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "results",
            "[]AlterUserScramCredentialsResult",
            "0+",
            fields=[
                F("user", "string", "0+"),
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+"),
            ],
        ),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS = api(
    "AlterUserScramCredentials",
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
