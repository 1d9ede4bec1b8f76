"""kafkalite: a Kafka-wire-compatible, durable commit-log broker in Python.

The package root re-exports the embedded broker and the version; everything else lives in subpackages.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
