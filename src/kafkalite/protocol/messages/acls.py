"""ACL administration APIs: DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), versions 0-3
(flexible from 2; v1 adds the resource pattern type of KIP-290).
"""

from __future__ import annotations

from kafkalite.protocol.schema import F, api, request, response

# resource / pattern / operation / permission codes are Kafka's (security.acl enums)
PATTERN_LITERAL = 3

# -- DescribeAcls (29) ---------------------------------------------------------------------------------

DescribeAclsRequest = request(
    29,
    "DescribeAclsRequest",
    valid="0-3",
    flexible="2+",
    fields=[
        F("resource_type_filter", "int8", "0+"),
        F("resource_name_filter", "string", "0+", nullable="0+"),
        F("pattern_type_filter", "int8", "1+", default=PATTERN_LITERAL),
        F("principal_filter", "string", "0+", nullable="0+"),
        F("host_filter", "string", "0+", nullable="0+"),
        F("operation", "int8", "0+"),
        F("permission_type", "int8", "0+"),
    ],
)

DescribeAclsResponse = response(
    29,
    "DescribeAclsResponse",
    valid="0-3",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F(
            "resources",
            "[]DescribeAclsResource",
            "0+",
            fields=[
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
                F("pattern_type", "int8", "1+", default=PATTERN_LITERAL),
                F(
                    "acls",
                    "[]AclDescription",
                    "0+",
                    fields=[
                        F("principal", "string", "0+"),
                        F("host", "string", "0+"),
                        F("operation", "int8", "0+"),
                        F("permission_type", "int8", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

DESCRIBE_ACLS = api("DescribeAcls", DescribeAclsRequest, DescribeAclsResponse)

# -- CreateAcls (30) -----------------------------------------------------------------------------------

CreateAclsRequest = request(
    30,
    "CreateAclsRequest",
    valid="0-3",
    flexible="2+",
    fields=[
        F(
            "creations",
            "[]AclCreation",
            "0+",
            fields=[
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
                F("resource_pattern_type", "int8", "1+", default=PATTERN_LITERAL),
                F("principal", "string", "0+"),
                F("host", "string", "0+"),
                F("operation", "int8", "0+"),
                F("permission_type", "int8", "0+"),
            ],
        ),
    ],
)

CreateAclsResponse = response(
    30,
    "CreateAclsResponse",
    valid="0-3",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "results",
            "[]AclCreationResult",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+", ignorable=True),
            ],
        ),
    ],
)

CREATE_ACLS = api("CreateAcls", CreateAclsRequest, CreateAclsResponse)

# -- DeleteAcls (31) -----------------------------------------------------------------------------------

DeleteAclsRequest = request(
    31,
    "DeleteAclsRequest",
    valid="0-3",
    flexible="2+",
    fields=[
        F(
            "filters",
            "[]DeleteAclsFilter",
            "0+",
            fields=[
                F("resource_type_filter", "int8", "0+"),
                F("resource_name_filter", "string", "0+", nullable="0+"),
                F("pattern_type_filter", "int8", "1+", default=PATTERN_LITERAL),
                F("principal_filter", "string", "0+", nullable="0+"),
                F("host_filter", "string", "0+", nullable="0+"),
                F("operation", "int8", "0+"),
                F("permission_type", "int8", "0+"),
            ],
        ),
    ],
)

DeleteAclsResponse = response(
    31,
    "DeleteAclsResponse",
    valid="0-3",
    flexible="2+",
    fields=[
        F("throttle_time_ms", "int32", "0+"),
        F(
            "filter_results",
            "[]DeleteAclsFilterResult",
            "0+",
            fields=[
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+"),
                F(
                    "matching_acls",
                    "[]DeleteAclsMatchingAcl",
                    "0+",
                    fields=[
                        F("error_code", "int16", "0+"),
                        F("error_message", "string", "0+", nullable="0+"),
                        F("resource_type", "int8", "0+"),
                        F("resource_name", "string", "0+"),
                        F("pattern_type", "int8", "1+", default=PATTERN_LITERAL),
                        F("principal", "string", "0+"),
                        F("host", "string", "0+"),
                        F("operation", "int8", "0+"),
                        F("permission_type", "int8", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

DELETE_ACLS = api("DeleteAcls", DeleteAclsRequest, DeleteAclsResponse)
