"""The broker-to-broker channel: BrokerChannel is an asyncio connection to one broker (plain TCP or
TLS, SASL login; ApiVersions negotiation, pipelined requests, timeouts, reconnect with backoff) over protocol's
ClientConnection; ChannelManager keeps one per broker id for the controller and the follower fetchers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import time
from typing import Any

from kafkalite.protocol.client_connection import ClientConnection, ProtocolError, Response
from kafkalite.protocol.messages.api_versions import ApiVersionsRequest
from kafkalite.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kafkalite.protocol.schema import APIS
from kafkalite.security.mechanisms import SaslClientExchange, SaslLogin
from kafkalite.security.sasl import SaslAuthenticationError

log = logging.getLogger("kafkalite.cluster.channel")

API_VERSIONS_KEY = 18


class ChannelError(Exception):
    """A request could not be sent or answered; the message says to whom and why."""


class UnsupportedVersion(ChannelError):
    """The broker does not serve the API at a version the caller needs."""


class BrokerChannel:
    """A connection to one broker. `send` may be called concurrently; requests go out in order."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "kafkalite-broker",
        connect_timeout_s: float = 10.0,
        request_timeout_s: float = 30.0,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        ssl_context: ssl.SSLContext | None = None,
        sasl_login: SaslLogin | None = None,
    ) -> None:
        self.host = host
        # set: the inter-broker listener is SASL (sasl.mechanism.inter.broker.protocol + JAAS login)
        self.sasl_login = sasl_login
        # set: the inter-broker listener is TLS (the context carries trust store and client cert)
        self.ssl_context = ssl_context
        self.port = port
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self._backoff_ms = reconnect_backoff_ms
        self._backoff_max_ms = reconnect_backoff_max_ms
        self._failures = 0
        self._retry_at = 0.0
        self._writer: asyncio.StreamWriter | None = None
        self._conn: ClientConnection | None = None
        self._waiters: dict[int, asyncio.Future[Response]] = {}
        self._reader_task: asyncio.Task[None] | None = None
        self._connect_lock = asyncio.Lock()
        self.versions: dict[int, tuple[int, int]] = {}
        self.closed = False

    def __repr__(self) -> str:
        return f"BrokerChannel({self.host}:{self.port})"

    # -- connection ------------------------------------------------------------------------------------
    async def _ensure(self) -> tuple[ClientConnection, asyncio.StreamWriter]:
        if self.closed:
            raise ChannelError(f"channel to {self.host}:{self.port} is closed")
        if self._conn is not None and self._writer is not None:
            return self._conn, self._writer
        async with self._connect_lock:
            if self._conn is not None and self._writer is not None:
                return self._conn, self._writer
            wait = self._retry_at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                tls: dict[str, Any] = {}
                if self.ssl_context is not None:
                    tls = {"ssl": self.ssl_context, "server_hostname": self.host}
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, **tls),
                    self.connect_timeout_s,
                )
            except ssl.SSLError as exc:
                self._note_failure()
                why = exc.verify_message if isinstance(exc, ssl.SSLCertVerificationError) else None
                raise ChannelError(
                    f"TLS handshake with broker at {self.host}:{self.port} failed: "
                    f"{why or exc.reason or exc}"
                ) from None
            except (TimeoutError, OSError) as exc:
                self._note_failure()
                raise ChannelError(
                    f"cannot connect to broker at {self.host}:{self.port}: {exc or 'timed out'}"
                ) from None
            if self.ssl_context is not None:
                log.info(
                    "%s: connected to broker at %s:%d over TLS (%s)",
                    self.client_id,
                    self.host,
                    self.port,
                    writer.get_extra_info("ssl_object").version(),
                )
            conn = ClientConnection(self.client_id)
            self._conn, self._writer = conn, writer
            self._reader_task = asyncio.get_running_loop().create_task(
                self._read_loop(conn, reader), name=f"channel-{self.host}:{self.port}"
            )
            try:
                resp = await self._request(ApiVersionsRequest(), 0)
            except ChannelError:
                self._drop("ApiVersions failed")
                raise
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.body.api_keys}
            if self.sasl_login is not None:
                try:
                    await self._authenticate(self.sasl_login)
                except ChannelError as exc:
                    self._drop(str(exc))
                    raise
            self._failures = 0
            return conn, writer

    async def _authenticate(self, login: SaslLogin) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the exchange is done (ChannelError if not)."""
        where = f"broker at {self.host}:{self.port}"
        hs = (await self._request(SaslHandshakeRequest(mechanism=login.mechanism), 1)).body
        if hs.error_code != 0:
            raise ChannelError(
                f"{where} refused SASL mechanism {login.mechanism} (error {hs.error_code}; "
                f"enabled: {', '.join(hs.mechanisms)})"
            )
        exchange = SaslClientExchange(login)
        version = self.version_for(SaslAuthenticateRequest.API_KEY, 2)
        token: bytes | None = exchange.first_token()
        while token is not None:
            resp = (await self._request(SaslAuthenticateRequest(auth_bytes=token), version)).body
            if resp.error_code != 0:
                raise ChannelError(
                    f"SASL/{login.mechanism} login as {login.username} to {where} failed: "
                    f"{resp.error_message or resp.error_code}"
                )
            try:
                token = exchange.next_token(bytes(resp.auth_bytes))
            except SaslAuthenticationError as exc:
                raise ChannelError(f"SASL/{login.mechanism} with {where}: {exc}") from None
        log.debug("%s: authenticated to %s as %s", self.client_id, where, login.username)

    def _note_failure(self) -> None:
        self._failures += 1
        backoff = min(self._backoff_max_ms, self._backoff_ms * 2 ** min(self._failures, 10))
        self._retry_at = time.monotonic() + backoff * random.uniform(0.8, 1.2) / 1000

    async def _read_loop(self, conn: ClientConnection, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                data = await reader.read(1 << 20)
                if not data:
                    raise ChannelError(f"broker at {self.host}:{self.port} closed the connection")
                for resp in conn.receive_data(data):
                    fut = self._waiters.pop(resp.correlation_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(resp)
        except asyncio.CancelledError:
            raise
        except (ChannelError, ProtocolError, OSError) as exc:
            if self._conn is conn:
                self._drop(str(exc))

    def _drop(self, reason: str) -> None:
        """Forget the connection; every request waiting on it fails with `reason`."""
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        task, self._reader_task = self._reader_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        waiters, self._waiters = self._waiters, {}
        for fut in waiters.values():
            if not fut.done():
                fut.set_exception(ChannelError(f"{self.host}:{self.port}: {reason}"))
        if not self.closed:
            self._note_failure()

    # -- requests --------------------------------------------------------------------------------------
    def version_for(self, api_key: int, cap: int | None = None) -> int:
        api = APIS[api_key]
        lo, hi = self.versions.get(api_key, (-1, -1))
        top = min(hi, api.max_version, cap if cap is not None else 1 << 15)
        if top < max(lo, api.min_version):
            raise UnsupportedVersion(
                f"broker at {self.host}:{self.port} does not support {api.name}"
            )
        return top

    async def send(self, request: Any, version: int | None = None, min_version: int = 0) -> Any:
        """Send `request` (at `version`, or the highest both sides support) and return the decoded
        response; ChannelError when the broker cannot be reached or does not answer in time,
        UnsupportedVersion when it does not serve the API at `min_version` or above."""
        await self._ensure()
        v = self.version_for(int(request.API_KEY), version)
        if v < min_version:
            raise UnsupportedVersion(
                f"broker at {self.host}:{self.port} serves {APIS[int(request.API_KEY)].name} only "
                f"up to v{v}, below v{min_version}"
            )
        return (await self._request(request, v)).body

    async def _request(self, request: Any, version: int) -> Response:
        conn, writer = self._conn, self._writer
        if conn is None or writer is None:
            raise ChannelError(f"no connection to {self.host}:{self.port}")
        corr, frame = conn.send_request(request, version)
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        # a caller that timed out no longer awaits: its future's failure is expected, not news
        fut.add_done_callback(_retrieve)
        self._waiters[corr] = fut
        try:
            writer.write(frame)
        except OSError as exc:
            self._drop(str(exc))
            raise ChannelError(f"cannot write to {self.host}:{self.port}: {exc}") from None
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.request_timeout_s)
        except TimeoutError:
            name = APIS[int(request.API_KEY)].name
            self._drop(f"{name} request timed out after {self.request_timeout_s:.0f} s")
            raise ChannelError(
                f"{name} to {self.host}:{self.port} got no answer in {self.request_timeout_s:.0f} s"
            ) from None

    async def close(self) -> None:
        self.closed = True
        task = self._reader_task
        self._drop("channel closed")
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _retrieve(fut: asyncio.Future[Response]) -> None:
    if not fut.cancelled():
        fut.exception()


class ChannelManager:
    """One BrokerChannel per broker id; a broker that re-registers elsewhere gets a new channel."""

    def __init__(self, client_id: str = "kafkalite-broker", **channel_args: Any) -> None:
        self.client_id = client_id
        self._args = channel_args
        self._channels: dict[int, BrokerChannel] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def get(self, broker_id: int, host: str, port: int) -> BrokerChannel:
        ch = self._channels.get(broker_id)
        if ch is not None and (ch.host, ch.port) == (host, port) and not ch.closed:
            return ch
        if ch is not None:
            self._close_later(ch)
        ch = self._channels[broker_id] = BrokerChannel(
            host, port, client_id=self.client_id, **self._args
        )
        return ch

    def existing(self, broker_id: int) -> BrokerChannel | None:
        return self._channels.get(broker_id)

    def remove(self, broker_id: int) -> None:
        ch = self._channels.pop(broker_id, None)
        if ch is not None:
            self._close_later(ch)

    def _close_later(self, ch: BrokerChannel) -> None:
        task = asyncio.get_running_loop().create_task(ch.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close_all(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for ch in channels:
            await ch.close()
        for t in list(self._closing):
            with contextlib.suppress(Exception):
                await t
