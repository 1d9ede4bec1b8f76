"""NetworkClient: one asyncio connection per broker with ordered in-flight queues, version negotiation,
request timeouts, reconnect backoff and metadata refresh (client/io_thread.py runs that loop behind the
sync APIs).
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, cast, overload

import kafkalite.protocol.messages  # noqa: F401  (registers every API)
from kafkalite.client.config import parse_servers
from kafkalite.client.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    SslAuthenticationError,
    UnsupportedFeatureError,
)
from kafkalite.client.io_thread import IOThread
from kafkalite.client.metadata import ClusterMetadata, merge_partial
from kafkalite.client.security import sasl_authenticate, security_settings, tls_failure_reason
from kafkalite.protocol.client_connection import ClientConnection, ProtocolError
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.framing import DEFAULT_MAX_FRAME
from kafkalite.protocol.messages.metadata import MetadataRequest
from kafkalite.protocol.primitives import Buffer
from kafkalite.protocol.sasl_client import SaslLogin
from kafkalite.protocol.schema import APIS, Request, Response

log = logging.getLogger("kafkalite.client.network")
T = TypeVar("T")
API_VERSIONS = 18
METADATA = 3
BOOTSTRAP_BASE = -1000  # pseudo node ids for bootstrap servers: -1000, -1001, ...
_Resp = TypeVar("_Resp", bound=Response)


class BrokerConnection:
    """One TCP connection: the asyncio side of a sans-IO ClientConnection (which frames requests and
    matches responses to them); each request's future is resolved by its correlation id."""

    def __init__(self, node_id: int, host: str, port: int, client: NetworkClient) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client = client
        self.versions: dict[int, int] = {}
        self.max_in_flight = max(1, int(client.config["max.in.flight.requests.per.connection"]))
        self._slots = asyncio.Semaphore(self.max_in_flight)
        # a fetch answers up to fetch.max.bytes (and a first batch larger than that): leave room
        max_frame = max(DEFAULT_MAX_FRAME, 2 * int(client.config.get("fetch.max.bytes") or 0))
        # lenient decoding, as Kafka's clients do: bytes past the fields we know are ignored
        self._conn = ClientConnection(client.client_id, max_frame, exact=False)
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self.closed = False
        self.last_used = time.monotonic()

    @property
    def in_flight(self) -> int:
        return len(self._waiters)

    async def connect(self) -> None:
        """TCP (and TLS for SSL / SASL_SSL), ApiVersions, then SASL for SASL_PLAINTEXT / SASL_SSL."""
        security = self.client.security
        timeout = self.client.config["socket.connection.setup.timeout.ms"] / 1000
        tls = security.ssl_context
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host,
                    self.port,
                    limit=1 << 22,
                    ssl=tls,
                    server_hostname=self.host if tls is not None else None,
                    ssl_handshake_timeout=timeout if tls is not None else None,
                ),
                timeout,
            )
        except ssl.SSLError as exc:
            raise SslAuthenticationError(
                f"TLS handshake with {self.host}:{self.port} failed: {tls_failure_reason(exc)}"
            ) from None
        except (TimeoutError, OSError) as exc:
            hint = " (TLS handshake: is this an SSL / SASL_SSL listener?)" if tls else ""
            raise KafkaConnectionError(
                f"cannot connect to {self.host}:{self.port}: {exc!r}{hint}"
            ) from None
        self._set_socket_buffers()
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        try:
            await self._negotiate()
        except KafkaConnectionError as exc:
            if tls is not None and "SSL" in str(exc).upper():
                # TLS 1.3: the broker's refusal of our certificate arrives after the handshake
                raise SslAuthenticationError(
                    f"TLS with {self.host}:{self.port} failed (does the broker require a client "
                    f"certificate, ssl.certificate.location?): {exc}"
                ) from None
            raise
        if security.login is not None:
            await self._authenticate(security.login)

    def _set_socket_buffers(self) -> None:
        """receive.buffer.bytes / send.buffer.bytes, when not -1 (the operating system's sizes)."""
        assert self._writer is not None
        sock = self._writer.get_extra_info("socket")
        if sock is None:
            return
        for name, opt in (
            ("receive.buffer.bytes", socket.SO_RCVBUF),
            ("send.buffer.bytes", socket.SO_SNDBUF),
        ):
            size = int(self.client.config.get(name, -1))
            if size > 0:
                sock.setsockopt(socket.SOL_SOCKET, opt, size)

    async def _authenticate(self, login: SaslLogin, *, reauthenticating: bool = False) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism's exchange is done; a refusal
        raises SaslAuthenticationError with the broker's error code and message (never retried).
        A session lifetime in the answer (KIP-368) schedules a re-authentication before it ends."""
        send = self._exchange if reauthenticating else self.send
        where = f"{self.host}:{self.port}"
        lifetime_ms = await sasl_authenticate(send, self.versions, login, where)
        log.debug("authenticated to %s with SASL/%s as %s", where, login.mechanism, login.username)
        if lifetime_ms > 0 and not self.closed:
            # as Kafka's clients: at 85-95 % of the session, so no request meets an expired one
            delay = lifetime_ms * random.uniform(0.85, 0.95) / 1000
            self._reauth_task = asyncio.get_running_loop().create_task(
                self._reauthenticate(login, delay)
            )

    async def _reauthenticate(self, login: SaslLogin, delay: float) -> None:
        """KIP-368: hold every in-flight slot (no request may come between SaslHandshake and the
        last SaslAuthenticate), log in again on this connection, let requests flow again. A
        failure closes the connection with the error; the next request connects afresh."""
        await asyncio.sleep(delay)
        held = 0
        try:
            for _ in range(self.max_in_flight):
                await self._slots.acquire()
                held += 1
            await self._authenticate(login, reauthenticating=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("re-authentication to node %s failed: %s", self.node_id, exc)
            self.close(exc)
        finally:
            for _ in range(held):
                self._slots.release()

    async def _negotiate(self) -> None:
        api = APIS[API_VERSIONS]
        resp = None
        for version in (3, 0):
            req = api.request(client_software_name="kafkalite", client_software_version="0.1")
            resp = await self.send(req, version=version)
            if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
                continue
            break
        assert resp is not None
        if resp.error_code:
            raise KafkaError(resp.error_code, "ApiVersions failed")
        for k in resp.api_keys:
            ours = APIS.get(k.api_key)
            if ours is None:
                continue
            top = min(k.max_version, ours.max_version)
            if top >= max(k.min_version, ours.min_version):
                self.versions[k.api_key] = top

    def version(self, api_key: int, cap: int | None = None) -> int:
        v = self.versions.get(api_key)
        if v is None:
            raise UnsupportedFeatureError(
                f"broker {self.node_id} does not support {APIS[api_key].name} (API key {api_key})"
            )
        return v if cap is None else min(v, cap)

    @overload
    async def send(
        self,
        request: Request[_Resp],
        *,
        version: int | None = None,
        expect_response: Literal[True] = True,
        timeout: float | None = None,
        on_written: Callable[[], None] | None = None,
    ) -> _Resp: ...
    @overload
    async def send(
        self,
        request: Request[_Resp],
        *,
        version: int | None = None,
        expect_response: bool,
        timeout: float | None = None,
        on_written: Callable[[], None] | None = None,
    ) -> _Resp | None: ...
    async def send(
        self,
        request: Request[_Resp],
        *,
        version: int | None = None,
        expect_response: bool = True,
        timeout: float | None = None,
        on_written: Callable[[], None] | None = None,
    ) -> _Resp | None:
        """Send one request and await its response (None without `expect_response`); `on_written`
        is called once the request is handed to the transport."""
        if self.closed or self._writer is None:
            raise KafkaConnectionError(f"connection to node {self.node_id} is closed")
        await self._slots.acquire()
        try:
            response = await self._exchange(request, version, expect_response, timeout, on_written)
        finally:
            self._slots.release()
        return cast("_Resp | None", response)  # decoded as request.RESPONSE

    async def _exchange(
        self,
        request: Any,
        version: int | None,
        expect_response: bool = True,
        timeout: float | None = None,
        on_written: Callable[[], None] | None = None,
    ) -> Any:
        """`send` once its in-flight slot is held (re-authentication holds them all)."""
        key = request.API_KEY
        v = self.version(key) if version is None else version
        if self.closed:
            raise KafkaConnectionError(f"connection to node {self.node_id} is closed")
        try:
            # large bytes fields (Produce's record batches) are passed through, not copied: the
            # frame goes out as one vectored write of the encoded pieces and the batches' buffers
            corr, parts = self._conn.send_request_parts(request, v, expect_response=expect_response)
        except ProtocolError as exc:
            raise KafkaConnectionError(f"connection to node {self.node_id}: {exc}") from None
        self.last_used = time.monotonic()
        if not expect_response:
            self._write(parts, on_written)
            await self._drain()
            return None
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[corr] = fut
        self._write(parts, on_written)
        await self._drain()
        if timeout is None:
            timeout = self.client.request_timeout
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            self.close(KafkaTimeoutError(f"request to node {self.node_id} timed out"))
            raise KafkaTimeoutError(
                f"{APIS[key].name} to node {self.node_id} got no response in {timeout} s"
            ) from None

    def _write(self, parts: list[Buffer], on_written: Callable[[], None] | None) -> None:
        assert self._writer is not None
        if len(parts) == 1:
            self._writer.write(parts[0])
        else:
            self._writer.writelines(parts)
        if on_written is not None:
            on_written()

    async def _drain(self) -> None:
        assert self._writer is not None
        transport = self._writer.transport
        if transport.get_write_buffer_size() > 1 << 20:
            try:
                await self._writer.drain()
            except (OSError, RuntimeError) as exc:
                self.close(KafkaConnectionError(str(exc)))
                raise KafkaConnectionError(f"write to node {self.node_id} failed: {exc}") from None

    async def _read_loop(self) -> None:
        reader = self._reader
        assert reader is not None
        conn = self._conn
        waiters = self._waiters
        err: BaseException = KafkaConnectionError(f"node {self.node_id} closed the connection")
        try:
            while True:
                # exactly what the connection still needs: the 4-byte length, then the whole body,
                # which reaches the decoder as one piece it passes on without copying
                try:
                    data = await reader.readexactly(conn.bytes_needed)
                except asyncio.IncompleteReadError:
                    if conn.in_flight:
                        err = KafkaConnectionError(
                            f"node {self.node_id} closed the connection with "
                            f"{conn.in_flight} request(s) unanswered"
                        )
                    break
                for resp in conn.receive_data(data):
                    fut = waiters.pop(resp.correlation_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(resp.body)
        except asyncio.CancelledError:
            err = KafkaConnectionError("client closed")
        except OSError as exc:
            err = KafkaConnectionError(f"connection to node {self.node_id} lost: {exc}")
        except ProtocolError as exc:
            err = KafkaConnectionError(
                f"node {self.node_id} at {self.host}:{self.port} broke the protocol, "
                f"connection closed: {exc}"
            )
        self.close(err)

    def close(self, err: BaseException | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        if self._writer is not None:
            self._writer.close()
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            self._read_task.cancel()
        if self._reauth_task is not None and self._reauth_task is not asyncio.current_task():
            self._reauth_task.cancel()
        err = err or KafkaConnectionError(f"connection to node {self.node_id} closed")
        self._conn.close()
        waiters = list(self._waiters.values())
        self._waiters.clear()
        for fut in waiters:
            if not fut.done():
                fut.set_exception(err)
                # a caller that stopped waiting (a cancelled long-poll fetch) is not told: no
                # "exception was never retrieved" at exit; one still awaiting gets the error
                fut.exception()
        self.client._forget(self)


class NetworkClient:
    """Connections to every broker, keyed by node id, plus the metadata cache and its refresh."""

    def __init__(self, config: dict[str, Any], io: IOThread) -> None:
        self.config = config
        self.io = io
        self.client_id = config["client.id"]
        self.request_timeout = config["request.timeout.ms"] / 1000
        self.bootstrap = parse_servers(config["bootstrap.servers"])
        self.security = security_settings(config)
        self.metadata = ClusterMetadata(config["metadata.max.age.ms"])
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future[BrokerConnection]] = {}
        self._backoff: dict[
            int, tuple[float, float]
        ] = {}  # node -> (next attempt, current backoff)
        self._refresh_task: asyncio.Future[None] | None = None
        self.extra_nodes: dict[int, tuple[str, int]] = {}  # e.g. group coordinator connections
        self.closed = False

    # -- connections
    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id <= BOOTSTRAP_BASE:
            return self.bootstrap[BOOTSTRAP_BASE - node_id]
        if node_id in self.extra_nodes:
            return self.extra_nodes[node_id]
        b = self.metadata.broker(node_id)
        if b is None:
            raise KafkaConnectionError(f"unknown broker node {node_id}")
        return b.host, b.port

    def connected(self, node_id: int) -> bool:
        c = self._conns.get(node_id)
        return c is not None and not c.closed

    async def connection(self, node_id: int) -> BrokerConnection:
        c = self._conns.get(node_id)
        if c is not None and not c.closed:
            return c
        pending = self._connecting.get(node_id)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        self._connecting[node_id] = fut
        try:
            nxt, backoff = self._backoff.get(node_id, (0.0, 0.0))
            wait = nxt - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            host, port = self._address(node_id)
            conn = BrokerConnection(node_id, host, port, self)
            try:
                await conn.connect()
            except BaseException as exc:
                conn.close(exc if isinstance(exc, Exception) else None)
                base = self.config["reconnect.backoff.ms"] / 1000
                cap = self.config["reconnect.backoff.max.ms"] / 1000
                backoff = min(cap, max(base, backoff * 2))
                jitter = backoff * random.uniform(0.8, 1.2)
                self._backoff[node_id] = (time.monotonic() + jitter, backoff)
                raise
            self._backoff.pop(node_id, None)
            self._conns[node_id] = conn
            fut.set_result(conn)
            return conn
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # mark retrieved
            raise
        finally:
            self._connecting.pop(node_id, None)

    def _forget(self, conn: BrokerConnection) -> None:
        if self._conns.get(conn.node_id) is conn:
            del self._conns[conn.node_id]
            if conn.node_id >= 0:
                self.metadata.request_update()

    async def send(self, node_id: int, request: Request[_Resp], **kw: Any) -> _Resp:
        conn = await self.connection(node_id)
        return cast("_Resp", await conn.send(request, **kw))

    def least_loaded_node(self) -> int:
        """A connected node with the fewest in-flight requests, else a known broker, else a bootstrap."""
        best = None
        for node_id, c in self._conns.items():
            if (
                not c.closed
                and 0 <= node_id < 1 << 30
                and (best is None or c.in_flight < best.in_flight)
            ):
                best = c
        if best is not None:
            return best.node_id
        nodes = [
            n
            for n in self.metadata.brokers
            if self._backoff.get(n, (0.0, 0.0))[0] <= time.monotonic()
        ]
        if nodes:
            return random.choice(nodes)
        for c in self._conns.values():
            if not c.closed and c.node_id < 1 << 30:
                return c.node_id
        boots = list(range(len(self.bootstrap)))
        boots.sort(key=lambda i: self._backoff.get(BOOTSTRAP_BASE - i, (0.0, 0.0))[0])
        return BOOTSTRAP_BASE - boots[0]

    async def send_any(self, request: Request[_Resp], **kw: Any) -> _Resp:
        """Send to the least loaded node, trying others when a connection fails."""
        last: BaseException | None = None
        tried: set[int] = set()
        for _ in range(len(self.bootstrap) + len(self.metadata.brokers) + 1):
            node = self.least_loaded_node()
            if node in tried:
                node = next(
                    (
                        n
                        for n in [
                            *self.metadata.brokers,
                            *range(-1000, -1000 - len(self.bootstrap), -1),
                        ]
                        if n not in tried
                    ),
                    node,
                )
            tried.add(node)
            try:
                return await self.send(node, request, **kw)
            except KafkaConnectionError as exc:
                last = exc
        raise NoBrokersAvailable(f"no broker reachable: {last}")

    async def api_version(self, api_key: int, node_id: int | None = None) -> int:
        conn = await self.connection(self.least_loaded_node() if node_id is None else node_id)
        return conn.version(api_key)

    # -- metadata
    async def refresh_metadata(self, topics: list[str] | None = None) -> Any:
        """Fetch metadata now (for the wanted topics unless `topics` is given) and update the cache."""
        md = self.metadata
        names = md.request_topics() if topics is None else topics
        req_cls = MetadataRequest
        req = req_cls(
            topics=None if names is None else [req_cls.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=bool(self.config.get("allow.auto.create.topics", True)),
        )
        try:
            resp = await self.send_any(req)
        except Exception:
            md.failed_update()
            raise
        if topics is None or names is None:
            md.update(resp)
        else:
            merged = merge_partial(md, resp)
            md.update(merged)
        return resp

    async def ensure_metadata(self, timeout: float | None = None) -> None:
        """Refresh if the cache is stale or an update was requested (one refresh at a time)."""
        if not self.metadata.needs_update():
            return
        if self._refresh_task is None or self._refresh_task.done():
            self._refresh_task = asyncio.ensure_future(self._refresh_with_backoff())
        await asyncio.wait_for(asyncio.shield(self._refresh_task), timeout)

    async def _refresh_with_backoff(self) -> None:
        age = time.monotonic() - self.metadata.last_refresh
        backoff = self.config["retry.backoff.ms"] / 1000
        if age < backoff:
            await asyncio.sleep(backoff - age)
        try:
            await self.refresh_metadata()
        except (KafkaConnectionError, NoBrokersAvailable, KafkaTimeoutError) as exc:
            log.debug("metadata refresh failed: %s", exc)

    async def wait_on(self, coro_fn: Callable[[], Awaitable[T]]) -> T:
        return await coro_fn()

    async def close(self) -> None:
        self.closed = True
        for c in list(self._conns.values()):
            c.close()


def retrieve_auth_error(task: asyncio.Future[Any]) -> None:
    """Done-callback for background tasks (a metadata refresh the fetcher or sender started): an
    AuthenticationError there is raised again by the user's next call, so it is not left unretrieved."""
    if not task.cancelled() and isinstance(task.exception(), AuthenticationError):
        log.debug("background task: %s", task.exception())


def error_of(code: int, what: str = "") -> KafkaError | None:
    return KafkaError(code, what or None) if code else None
