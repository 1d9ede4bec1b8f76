"""HttpListener: one aiohttp application per broker, bound to every `http.listeners` URL, started in
the broker's event loop after the broker serves; metrics, REST and console routes are added by setup().
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import web

from kafkalite.broker.config.broker_config import ConfigError

if TYPE_CHECKING:
    from kafkalite.broker.server import BrokerServer

log = logging.getLogger("kafkalite.web")

BROKER_KEY: web.AppKey[BrokerServer] = web.AppKey("broker")


def http_listener_urls(broker: BrokerServer) -> list[tuple[str, int]]:
    """(host, port) of each `http.listeners` URL; ConfigError for a URL kafkalite cannot serve."""
    raw = broker.config.get("http.listeners") or []
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    out: list[tuple[str, int]] = []
    for item in (str(i).strip() for i in items):
        if not item:
            continue
        url = urlsplit(item)
        if url.scheme != "http" or url.hostname is None or url.port is None:
            raise ConfigError(
                f"http.listeners={item!r}: expected http://HOST:PORT (https is not supported yet)"
            )
        out.append((url.hostname, url.port))
    return out


def build_app(broker: BrokerServer) -> web.Application:
    """The application: every route module's setup(app), in order."""
    from kafkalite.web import console, metrics, rest, schema_registry

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app[BROKER_KEY] = broker
    metrics.setup(app)
    rest.setup(app)
    schema_registry.setup(app)
    console.setup(app)
    return app


class HttpListener:
    """The broker's HTTP side: a BrokerExtension (started after the broker, stopped before it)."""

    def __init__(self, urls: list[tuple[str, int]]) -> None:
        self.urls = urls
        self.bound: list[tuple[str, int]] = []
        self._runner: web.AppRunner | None = None
        self._broker: BrokerServer | None = None

    async def start(self, broker: BrokerServer) -> None:
        self._broker = broker
        app = build_app(broker)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        self._runner = runner
        for host, port in self.urls:
            site = web.TCPSite(runner, host, port, reuse_address=True)
            await site.start()
            actual = runner.addresses[-1][1] if runner.addresses else port
            self.bound.append((host, int(actual)))
            log.info("HTTP listener on http://%s:%d (metrics, REST v3, console)", host, actual)
        # the Schema Registry's primary announces this URL so the other brokers forward writes here
        host, port = self.bound[0]
        if host in ("0.0.0.0", "::", ""):
            host = broker.local_endpoint().host
        broker.schema_registry.listener_bound(broker.broker_id, f"http://{host}:{port}")

    async def stop(self) -> None:
        if self._broker is not None:
            await self._broker.schema_registry.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        host, port = self.bound[0] if self.bound else self.urls[0]
        return f"http://{host}:{port}"


def attach(broker: BrokerServer) -> HttpListener | None:
    """Add the HTTP listener to `broker` when `http.listeners` is set (checked now, bound at start)."""
    urls = http_listener_urls(broker)
    if not urls:
        return None
    listener = HttpListener(urls)
    broker.extensions.append(listener)
    return listener


def listener_of(broker: BrokerServer) -> HttpListener | None:
    return next((e for e in broker.extensions if isinstance(e, HttpListener)), None)
