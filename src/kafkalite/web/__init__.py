"""kafkalite.web: the broker's HTTP listener (aiohttp in the broker's event loop) serving Prometheus
metrics at /metrics, the REST Proxy v3 subset at /v3 and the web console at /.

`attach(broker)` adds the listener to a BrokerServer when `http.listeners` is set.
"""

from __future__ import annotations

from kafkalite.web.server import HttpListener, attach, http_listener_urls, listener_of

__all__ = ["HttpListener", "attach", "http_listener_urls", "listener_of"]
