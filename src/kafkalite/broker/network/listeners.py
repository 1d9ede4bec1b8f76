"""The broker's listeners: one server socket and accept loop per configured listener under the
connection quotas, the TLS handshake of connections on SSL listeners, and the address each advertises.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkalite.broker.config.broker_config import (
    SASL_SECURITY_PROTOCOLS,
    TLS_SECURITY_PROTOCOLS,
    BrokerConfig,
    Listener,
)
from kafkalite.broker.network.connection import Connection, ConnectionOwner
from kafkalite.broker.network.connection_quotas import ConnectionQuotas, ConnectionSlot, Throttled
from kafkalite.broker.network.tls import handshake_failure_reason, server_context, ssl_settings
from kafkalite.cluster.metadata_cache import BrokerEndpoint, ListenerEndpoint

log = logging.getLogger("kafkalite.broker.listeners")
broker_log = logging.getLogger("kafkalite.broker")  # (these lines were the broker's before)

TLS_HANDSHAKE_TIMEOUT_S = 10.0
ACCEPT_BATCH = 64  # connections accepted per wake-up of a listener, at most


@dataclass
class ListenerRuntime:
    """A configured listener: its bind address, protocol, TLS context (SSL, SASL_SSL) and, once bound,
    its server socket and advertised address."""

    name: str
    security_protocol: str
    bind: Listener
    advertised: Listener
    ssl_context: ssl.SSLContext | None = None
    server: Acceptor | None = None  # its accept loop, once bound
    handshakes: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def endpoint(self) -> ListenerEndpoint:
        a = self.advertised
        return ListenerEndpoint(self.name, a.host, a.port, self.security_protocol)


def configure_listeners(
    config: BrokerConfig, dynamic_ssl: dict[str, dict[str, str]] | None = None
) -> list[ListenerRuntime]:
    """Every listener with its TLS context built: a TLS setting that cannot work raises
    TlsConfigError here, before anything listens."""
    out = []
    for lst, adv in zip(config.listeners, config.advertised_listeners, strict=True):
        proto = config.security_protocol(lst.name)
        ctx = None
        if proto in TLS_SECURITY_PROTOCOLS:
            dyn = (dynamic_ssl or {}).get(lst.name)
            sasl = proto in SASL_SECURITY_PROTOCOLS
            ctx = server_context(ssl_settings(config, lst.name, dyn, sasl=sasl))
        out.append(ListenerRuntime(lst.name, proto, lst, adv, ctx))
    return out


async def bind_listeners(
    owner: ConnectionOwner, quotas: ConnectionQuotas, listeners: list[ListenerRuntime]
) -> None:
    """Open the server sockets (their connections served by `owner`, accepted under `quotas`); an
    ephemeral port (0) is advertised as the one bound."""
    for lr in listeners:
        try:
            sock = _listen_socket(lr.bind.host, lr.bind.port)
        except OSError as exc:
            raise ListenError.of(lr.bind, exc) from None
        srv = Acceptor(owner, quotas, lr, sock)
        lr.server = srv
        port = srv.sockets[0].getsockname()[1]
        a = lr.advertised
        host = a.host
        if host in ("", "0.0.0.0", "::"):
            host = advertised_host_name()
            log.info(
                "listener %s binds %s and advertised.listeners does not name it: advertising "
                "%s, this host's canonical name or first non-loopback address (set "
                "advertised.listeners to choose another)",
                lr.name,
                lr.bind.host or "every address",
                host,
            )
        lr.advertised = Listener(a.name, host, a.port or port)
        log.info(
            "listening on %s:%d for %s (advertised %s)",
            lr.bind.host,
            port,
            lr.security_protocol,
            lr.advertised.url(),
        )


def build_listener_tls(
    config: BrokerConfig, listeners: list[ListenerRuntime], per_broker: Mapping[str, str]
) -> dict[str, ssl.SSLContext]:
    """The TLS context of every SSL listener with `per_broker` dynamic settings over the static
    ones (TlsConfigError when one cannot work)."""
    return {
        lr.name: server_context(
            ssl_settings(
                config,
                lr.name,
                per_broker,
                sasl=lr.security_protocol in SASL_SECURITY_PROTOCOLS,
            )
        )
        for lr in listeners
        if lr.security_protocol in TLS_SECURITY_PROTOCOLS
    }


def install_listener_tls(
    listeners: list[ListenerRuntime], contexts: Mapping[str, ssl.SSLContext]
) -> None:
    """New connections on these listeners handshake with the new contexts; open ones keep theirs."""
    for lr in listeners:
        ctx = contexts.get(lr.name)
        if ctx is not None and ctx is not lr.ssl_context:
            lr.ssl_context = ctx
            broker_log.info("listener %s: TLS key and trust stores reloaded", lr.name)


def local_endpoint(
    broker_id: int, listeners: list[ListenerRuntime], inter_broker: str, rack: str | None
) -> BrokerEndpoint:
    """This broker as others reach it (the inter-broker listener), with every listener."""
    lr = next(x for x in listeners if x.name == inter_broker)
    return BrokerEndpoint(
        broker_id,
        lr.advertised.host,
        lr.advertised.port,
        rack,
        tuple(x.endpoint for x in listeners),
    )


async def reap_idle(connections: set[Connection], idle_ms: int) -> None:
    """Close connections idle (nothing read, nothing being answered) for more than
    connections.max.idle.ms; runs until cancelled."""
    if idle_ms <= 0:
        return
    period = min(max(idle_ms / 4000, 0.05), 30.0)
    while True:
        await asyncio.sleep(period)
        now = time.monotonic()
        for conn in list(connections):
            if not conn.busy and now - conn.last_activity > idle_ms / 1000:
                broker_log.info(
                    "closing %s: idle for more than connections.max.idle.ms=%d",
                    conn.peer,
                    idle_ms,
                )
                conn.close()


class ListenError(OSError):
    """A listener that cannot bind, said in one line with what to do about it."""

    @staticmethod
    def of(bind: Listener, exc: OSError) -> ListenError:
        where = f"{bind.host or '0.0.0.0'}:{bind.port}"
        if exc.errno == errno.EADDRINUSE:
            return ListenError(
                f"cannot listen on {where}: address in use (another broker? use --listen HOST:PORT)"
            )
        if exc.errno == errno.EADDRNOTAVAIL:
            return ListenError(
                f"cannot listen on {where}: no such address on this host (use --listen HOST:PORT)"
            )
        if exc.errno == errno.EACCES:
            return ListenError(f"cannot listen on {where}: permission denied (use a port >= 1024)")
        return ListenError(f"cannot listen on {where}: {exc.strerror or exc}")

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "cannot listen"


def advertised_host_name() -> str:
    """What a listener bound to every address advertises, as Kafka does: the canonical host name,
    else the first non-loopback address, else 127.0.0.1."""
    name = socket.getfqdn()
    try:
        addrs = {str(ai[4][0]) for ai in socket.getaddrinfo(name, None, socket.AF_INET)}
    except OSError:
        addrs = set()
    if addrs and not all(a.startswith("127.") for a in addrs):
        return name
    try:  # a UDP "connect" sends nothing: it only picks the outgoing interface
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))
            addr = str(s.getsockname()[0])
        if not addr.startswith("127."):
            return addr
    except OSError:
        pass
    return name if addrs else "127.0.0.1"


class Acceptor:
    """A listener's accept loop under the connection quotas (broker.connection_quotas): it waits
    for a free slot (max.connections) and for the creation rates before accepting, closes at once a
    connection whose address is at max.connections.per.ip, and hands the rest to a Connection. On
    TLS listeners each handshake runs on its own; one that fails is a warning naming the peer, the
    listener and why, and only that socket closes."""

    def __init__(
        self,
        owner: ConnectionOwner,
        quotas: ConnectionQuotas,
        listener: ListenerRuntime,
        sock: socket.socket,
    ) -> None:
        self.owner = owner
        self.quotas = quotas
        self.listener = listener
        self.sockets = [sock]
        self._sock = sock
        # connections over their ip entity's connection_creation_rate, closed after their delay
        self._throttled: dict[socket.socket, asyncio.TimerHandle] = {}
        self._accepting = asyncio.get_running_loop().create_task(
            self._accept_loop(), name=f"accept-{listener.name}"
        )

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        quotas = self.quotas
        name = self.listener.name
        while True:
            await quotas.wait_for_slot(name)
            delay = quotas.accept_delay(name)
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            try:
                sock, addr = await loop.sock_accept(self._sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                if self._sock.fileno() < 0:
                    return
                # EMFILE / ENFILE: nothing more can be opened; the client waits in the backlog
                quotas.refusals.warn(
                    "accept:" + name,
                    "listener %s: accept failed: %s (%d connections open; raise the open-file "
                    "limit or lower max.connections)",
                    name,
                    exc,
                    quotas.total,
                )
                await asyncio.sleep(0.1)
                continue
            self._admit(sock, addr)
            # take what else waits in the backlog without a round through the loop per socket
            for _ in range(ACCEPT_BATCH):
                if not quotas.may_accept(name) or quotas.accept_delay(name) > 0:
                    break
                try:
                    sock, addr = self._sock.accept()
                except OSError:  # BlockingIOError: the backlog is empty; others: next round
                    quotas.give_back(name)
                    break
                self._admit(sock, addr)

    def _admit(self, sock: socket.socket, addr: object) -> None:
        quotas = self.quotas
        ip, where = _peer_of(addr)
        slot = quotas.admit(self.listener.name, ip, where)
        if slot is None:
            _close_now(sock)
            return
        if isinstance(slot, Throttled):
            self._throttled[sock] = asyncio.get_running_loop().call_later(
                slot.close_after_s, self._close_throttled, sock
            )
            return
        task = asyncio.get_running_loop().create_task(self._open(sock, where, slot))
        self.listener.handshakes.add(task)
        task.add_done_callback(self.listener.handshakes.discard)

    async def _open(self, sock: socket.socket, where: str, slot: ConnectionSlot) -> None:
        lr = self.listener
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: Connection(self.owner, lr.name, lr.security_protocol, slot),
                sock,
                ssl=lr.ssl_context,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if lr.ssl_context else None,
            )
        except asyncio.CancelledError:
            slot.release()
            sock.close()
            raise
        except Exception as exc:
            slot.release()
            sock.close()
            if lr.ssl_context is None:
                log.info("connection from %s on listener %s failed: %s", where, lr.name, exc)
                return
            log.debug("TLS handshake of %s failed", where, exc_info=True)
            log.warning(
                "closing %s on listener %s: TLS handshake failed: %s",
                where,
                lr.name,
                handshake_failure_reason(exc),
            )

    def _close_throttled(self, sock: socket.socket) -> None:
        self._throttled.pop(sock, None)
        _close_now(sock)

    def close(self) -> None:
        self._accepting.cancel()
        self._sock.close()
        for sock, timer in list(self._throttled.items()):
            timer.cancel()
            _close_now(sock)
        self._throttled.clear()

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self._accepting


def _peer_of(addr: object) -> tuple[str, str]:
    """The address (for per-IP counts) and `address:port` (for log lines) of an accepted socket."""
    if isinstance(addr, tuple) and addr:
        return str(addr[0]), f"{addr[0]}:{addr[1]}"
    return str(addr), str(addr)


def _close_now(sock: socket.socket) -> None:
    """Close a refused connection before reading anything from it (the client sees end of file)."""
    with contextlib.suppress(OSError):
        sock.close()


def _listen_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), port))
        sock.listen(1024)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
