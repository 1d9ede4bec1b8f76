"""What a handler in broker/apis sees: the RequestContext of one request, and SlicedResponse for zero-copy data.

A handler returns a Response, None (send nothing), a SlicedResponse whose placeholder records are file
regions, or a DeferredResponse: the request's work is done and its answer will follow (acks=all waiting for
the in-sync replicas), so the connection may go on with the next request while answers keep their order.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.headers import RequestHeader
from kafkalite.protocol.server_connection import FileRegion as FileRegion
from kafkalite.protocol.server_connection import SlicedResponse as SlicedResponse
from kafkalite.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorized_operations,
)
from kafkalite.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from kafkalite.broker.server import BrokerServer


@dataclass(slots=True)
class RequestContext:
    broker: BrokerServer
    header: RequestHeader
    api_version: int
    connection: Any  # broker.connection.Connection, or a test's stand-in with the same fields
    received_ns: int = 0
    # client quotas: a follower's fetch is never throttled; time parked waiting (a long-poll
    # fetch) is not handler time for a request quota
    quota_exempt: bool = False
    parked_ns: int = 0

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def quota_client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def principal(self) -> KafkaPrincipal:
        """Who sent the request: the connection's principal (User:ANONYMOUS until TLS/SASL set it)."""
        principal: KafkaPrincipal = self.connection.principal
        return principal

    @property
    def client_host(self) -> str:
        """The peer's address without the port, as ACL host entries name it."""
        return str(self.connection.peer).rpartition(":")[0].strip("[]")

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """May this request's principal do `operation` on the resource? Always True when no
        authorizer is configured (one attribute check)."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(
            self.principal, self.client_host, operation, resource_type, name
        )

    def authorize_cluster(self, operation: AclOperation) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field of what this principal may do on the resource (every supported
        operation without an authorizer)."""
        return authorized_operations(
            lambda op: self.authorize(op, resource_type, name), resource_type
        )


@dataclass(slots=True)
class DeferredResponse:
    """The answer to a request whose side effects are done, awaited later: `answer` yields what a
    handler returns (a Response or None). The connection answers requests in order regardless."""

    answer: Awaitable[Any]
