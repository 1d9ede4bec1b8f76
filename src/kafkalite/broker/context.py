"""What a handler in broker/apis sees: the RequestContext of one request, and SlicedResponse for zero-copy data.

A handler returns a Response, None (send nothing), a SlicedResponse whose placeholder records are file
regions, or a DeferredResponse: the request's work is done and its answer will follow (acks=all waiting for
the in-sync replicas), so the connection may go on with the next request while answers keep their order.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kafkalite.protocol.headers import RequestHeader

if TYPE_CHECKING:
    from kafkalite.broker.server import BrokerServer


class FileRegion(Protocol):
    """What storage's FileSlice offers: an open file descriptor, a position and a length."""

    @property
    def fileno(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def length(self) -> int: ...

    def read_bytes(self) -> bytes: ...


@dataclass(slots=True)
class RequestContext:
    broker: BrokerServer
    header: RequestHeader
    api_version: int
    connection: Any  # broker.connection.Connection, or a test's stand-in with the same fields
    received_ns: int = 0

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


@dataclass(slots=True)
class SlicedResponse:
    """A response whose `records` fields hold placeholder markers standing for file regions.

    `regions` maps each marker (unique bytes) to the region that replaces it on the wire.
    """

    response: Any
    regions: dict[bytes, FileRegion] = field(default_factory=dict)

    def placeholder(self, region: FileRegion) -> bytes:
        marker = b"\x00kl-slice\x00" + os.urandom(10) + len(self.regions).to_bytes(4, "big")
        self.regions[marker] = region
        return marker


@dataclass(slots=True)
class DeferredResponse:
    """The answer to a request whose side effects are done, awaited later: `answer` yields what a
    handler returns (a Response or None). The connection answers requests in order regardless."""

    answer: Awaitable[Any]
