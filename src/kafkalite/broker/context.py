"""What a handler in broker/apis sees: the RequestContext of one request, and SlicedResponse for zero-copy data.

A handler returns a Response, None (send nothing), a SlicedResponse whose placeholder records are file
regions, or a DeferredResponse: the request's work is done and its answer will follow (acks=all waiting for
the in-sync replicas), so the connection may go on with the next request while answers keep their order.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

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
    from kafkalite.broker.config.broker_config import BrokerConfig
    from kafkalite.broker.security.sasl_auth import SaslSession
    from kafkalite.broker.server import BrokerServer
    from kafkalite.cluster.metadata_cache import MetadataCache
    from kafkalite.cluster.replica_manager import ReplicaManager


class RequestConnection(Protocol):
    """What a handler may use of the connection its request came on: a broker Connection, or the
    REST proxy's stand-in (no listener, never SASL)."""

    @property
    def principal(self) -> KafkaPrincipal: ...
    @property
    def peer(self) -> str: ...
    @property
    def listener_name(self) -> str | None: ...
    @property
    def security_protocol(self) -> str: ...
    @property
    def closed(self) -> bool: ...

    # ApiVersions v3+: the client's software name and version, for the metrics
    client_software: tuple[str, str] | None

    # SASL listeners: the authentication state until authenticated (None after, and elsewhere)
    @property
    def sasl(self) -> SaslSession | None: ...

    def sasl_authenticated(self, session: SaslSession) -> None: ...

    def close_after_failed_authentication(self, session: SaslSession) -> None: ...


@dataclass(slots=True)
class RequestContext:
    broker: BrokerServer
    header: RequestHeader
    api_version: int
    connection: RequestConnection
    received_ns: int = 0
    # client quotas: a follower's fetch is never throttled; time parked waiting (a long-poll
    # fetch) is not handler time for a request quota
    quota_exempt: bool = False
    parked_ns: int = 0

    # the components handlers use most, typed, read through the broker (which stays for the rest)
    @property
    def config(self) -> BrokerConfig:
        return self.broker.config

    @property
    def metadata_cache(self) -> MetadataCache:
        return self.broker.metadata_cache

    @property
    def replica_manager(self) -> ReplicaManager:
        """The data façade (made in the broker's start(), before any request is read)."""
        return self.broker.replica_manager

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def quota_client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def principal(self) -> KafkaPrincipal:
        """Who sent the request: the connection's principal (User:ANONYMOUS until TLS/SASL set it)."""
        return self.connection.principal

    @property
    def client_host(self) -> str:
        """The peer's address without the port, as ACL host entries name it."""
        return self.connection.peer.rpartition(":")[0].strip("[]")

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


T_co = TypeVar("T_co", covariant=True)

# what the request path hands a connection to write: encoded bytes, and file regions it sends as
# they are (sendfile, or a pread when small)
ResponsePiece = bytes | bytearray | memoryview | FileRegion
ResponsePieces = list[ResponsePiece]


@dataclass(slots=True)
class DeferredResponse(Generic[T_co]):
    """The answer to a request whose side effects are done, awaited later: `answer` yields what a
    handler returns (its response or None), or, once the request path has encoded it, the pieces
    to write. The connection answers requests in order regardless."""

    answer: Awaitable[T_co]
