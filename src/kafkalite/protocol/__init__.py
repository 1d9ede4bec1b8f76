"""The sans-IO Kafka protocol: primitives, the declarative message model, headers, framing, error codes.

No sockets and no asyncio here; `kafkalite.protocol.messages` registers every API in `schema.APIS`.
"""

from __future__ import annotations
