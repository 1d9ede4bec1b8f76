"""Message declarations, one module per API family; importing this package registers every API.

`kafkalite.protocol.schema.APIS` maps API key to `Api(request, response)` once these modules are imported.
"""

from __future__ import annotations

import importlib

_FAMILIES = (
    "api_versions",
    "produce",
    "fetch",
    "metadata",
    "offsets",
    "groups",
    "admin",
    "txn",
    "sasl",
    "cluster",
    "acls",
    "scram",
    "quotas",
    "consumer_groups",
    "share_groups",
    "share_state",
    "share_admin",
    "reassignments",
    "leaders",
    "delegation_tokens",
)

for _name in _FAMILIES:
    importlib.import_module(f"{__name__}.{_name}")
