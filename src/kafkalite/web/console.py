"""The web console at / (being built)."""

from __future__ import annotations

from aiohttp import web


def setup(app: web.Application) -> None:
    """Add the console's routes and assets."""
