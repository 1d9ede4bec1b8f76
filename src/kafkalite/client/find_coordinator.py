"""FindCoordinator from the client: the group or transaction coordinator of a key, reached on a
connection of its own (a pseudo node id above COORDINATOR_BASE, so a blocking JoinGroup holds no other socket).
"""

from __future__ import annotations

from kafkalite.client.network import NetworkClient
from kafkalite.protocol.errors import ErrorCode as E
from kafkalite.protocol.errors import KafkaError
from kafkalite.protocol.messages.groups import FindCoordinatorRequest

FIND_COORDINATOR = 10
# coordinator connections get their own node id (JoinGroup blocks a socket)
COORDINATOR_BASE = 1 << 30

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types


async def find_coordinator(client: NetworkClient, key: str, key_type: int) -> int:
    """One FindCoordinator for a group id (key type 0) or transactional id (1): the pseudo node id of the
    coordinator's connection; KafkaError with the broker's code when it answers an error."""
    req_cls = FindCoordinatorRequest
    conn = await client.connection(client.least_loaded_node())
    v = conn.version(FIND_COORDINATOR)
    if key_type and v < 1:
        raise KafkaError(
            E.UNSUPPORTED_VERSION, "FindCoordinator v0 cannot find a transaction coordinator"
        )
    if v >= 4:
        resp = await conn.send(req_cls(key_type=key_type, coordinator_keys=[key]), version=v)
        c = resp.coordinators[0]
        code, node_id, host, port = c.error_code, c.node_id, c.host, c.port
    else:
        resp = await conn.send(req_cls(key=key, key_type=key_type), version=v)
        code, node_id, host, port = resp.error_code, resp.node_id, resp.host, resp.port
    if code:
        raise KafkaError(code, f"FindCoordinator({key!r}, key type {key_type})")
    pseudo: int = COORDINATOR_BASE + node_id
    client.extra_nodes[pseudo] = (host, port)
    return pseudo
