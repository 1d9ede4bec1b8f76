"""How this broker reaches the others: its id (named in client ids) and the inter-broker listener's TLS
context and SASL login, settled once in BrokerServer's constructor, and the channels made from them.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from kafkalite.cluster.channel import ChannelManager
from kafkalite.security.mechanisms import SaslLogin


@dataclass(frozen=True, slots=True)
class InterBrokerSettings:
    """What a component that sends requests to other brokers needs to open channels to them."""

    broker_id: int
    ssl_context: ssl.SSLContext | None
    sasl_login: SaslLogin | None

    def channels(self, purpose: str) -> ChannelManager:
        """Channels to other brokers, named `broker-<id>-<purpose>` in their client id."""
        return ChannelManager(
            client_id=f"broker-{self.broker_id}-{purpose}",
            ssl_context=self.ssl_context,
            sasl_login=self.sasl_login,
        )
