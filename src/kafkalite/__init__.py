"""kafkalite: a Kafka-wire-compatible, durable commit-log broker in Python.

The package root re-exports the embedded broker and the version; everything else lives in subpackages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kafkalite.testing import Broker


def __getattr__(name: str) -> Any:
    if name == "Broker":  # lazy: importing kafkalite stays cheap for the client/protocol users
        from kafkalite.testing import Broker

        return Broker
    raise AttributeError(f"module 'kafkalite' has no attribute {name!r}")


__all__ = ["Broker", "__version__"]
