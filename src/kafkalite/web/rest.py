"""The REST Proxy v3 subset at /v3 (being built)."""

from __future__ import annotations

from aiohttp import web


def setup(app: web.Application) -> None:
    """Add the /v3 routes."""
