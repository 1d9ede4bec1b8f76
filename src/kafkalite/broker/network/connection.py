"""One client connection: whole frames in, requests handled one after another, responses out in order.

Pipelined requests queue up (reading pauses past a bound, and while queued.max.request.bytes' memory pool is
out of memory); file regions go out with os.sendfile on plain TCP.
A request answered later (DeferredResponse: acks=all waiting for the ISR) lets the next one start; answers
still leave in request order.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import socket
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol

from kafkalite.broker.config.broker_config import SASL_SECURITY_PROTOCOLS
from kafkalite.broker.context import DeferredResponse, FileRegion, ResponsePieces
from kafkalite.broker.network.memory_pool import ConnectionMemory
from kafkalite.broker.network.sendfile import SendfileStats, sendfile_region
from kafkalite.broker.network.tls import subject_rfc2253
from kafkalite.broker.security.sasl_auth import SaslSession, SaslState
from kafkalite.protocol.server_connection import ProtocolViolation, ServerConnection
from kafkalite.security.principal import ANONYMOUS, KafkaPrincipal, NoMatchingRule

if TYPE_CHECKING:
    from kafkalite.broker.config.broker_config import BrokerConfig
    from kafkalite.broker.dispatch import DispatchTable, HandlerEntry
    from kafkalite.broker.fetch_session import FetchSession
    from kafkalite.broker.network.connection_quotas import ConnectionSlot
    from kafkalite.broker.network.memory_pool import MemoryPool
    from kafkalite.broker.security.sasl_auth import SaslListenerSettings
    from kafkalite.broker.security.scram_credentials import ScramCredentialCache
    from kafkalite.broker.stats import BrokerStats
    from kafkalite.security.principal import SslPrincipalMapper

log = logging.getLogger("kafkalite.broker.connection")

MAX_QUEUED_REQUESTS = 64
# unsent answer bytes per connection before the request loop waits for the socket to drain
WRITE_BUFFER_HIGH = 16 * 1024 * 1024
OUT_COALESCE_BYTES = 256 * 1024
SENDFILE_MIN_BYTES = (
    64 * 1024
)  # smaller file regions go out with a pread + one write (fewer syscalls)
REGION_CHUNK_BYTES = 1 << 20  # without sendfile, file regions go out in reads of this size
# Produce, ListOffsets, Metadata, ApiVersions answer without waiting, so their answers may be coalesced
QUICK_KEYS = frozenset({0, 2, 3, 18})
YIELD_AFTER_S = 0.0005
SASL_SERVER_MAX_RECEIVE_SIZE = (
    524288  # longest stretch one connection's pipeline runs before yielding
)


class ConnectionOwner(Protocol):
    """What a connection uses of its broker (BrokerServer): settings, the APIs it serves, the
    request path, SASL and TLS principals, and the set of open connections it joins."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def dispatch(self) -> DispatchTable: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def sasl_listeners(self) -> dict[str, SaslListenerSettings]: ...
    @property
    def scram_credentials(self) -> ScramCredentialCache: ...
    @property
    def principal_mapper(self) -> SslPrincipalMapper: ...
    @property
    def sendfile_enabled(self) -> bool: ...
    @property
    def connections(self) -> set[Connection]: ...
    @property
    def memory_pool(self) -> MemoryPool | None: ...

    def handle_frame(
        self, conn: Connection, frame: bytes | bytearray
    ) -> Awaitable[ResponsePieces | DeferredResponse[ResponsePieces | None] | None]: ...


class CloseConnection(Exception):
    """Raised by the request path to drop the connection after logging why."""


class Connection(asyncio.BufferedProtocol):
    """One client connection. Slotted and allocating nothing big before data arrives: an idle
    connection costs the broker a few KiB (bench/bench_connections.py measures it)."""

    __slots__ = (
        "server", "slot", "listener_name", "security_protocol", "peer_certificate_subject",
        "_tls", "transport", "protocol", "decoder", "pending", "stats", "parked_ns", "peer",
        "client_software", "principal", "sasl", "last_activity", "closed", "_worker",
        "_reading_paused", "_write_paused", "_drained", "_sock_fd", "_send_fd", "_high",
        "use_sendfile", "fetch_sessions", "_eof", "_out", "_out_size", "_answers",
        "_answer_writer", "throttled_until", "memory", "_memory_muted", "_throttle_muted",
        "_transport_paused",
    )  # fmt: skip

    def __init__(
        self,
        server: ConnectionOwner,
        listener_name: str | None = None,
        security_protocol: str = "PLAINTEXT",
        slot: ConnectionSlot | None = None,
    ) -> None:
        self.server = server
        # this connection's share of the connection quotas, given back when it closes
        self.slot = slot
        # the listener this connection arrived on (Metadata answers with that listener's addresses)
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        # TLS: the client certificate's subject DN (RFC 2253), the principal an authorizer sees
        self.peer_certificate_subject: str | None = None
        self._tls = False
        self.transport: asyncio.Transport | None = None
        # the protocol state (framing, SASL v0 raw tokens, header versions); its decoder is ours
        self.protocol: ServerConnection[HandlerEntry] = ServerConnection(
            server.dispatch, server.config.socket_request_max_bytes
        )
        self.decoder = self.protocol.decoder
        # frames read and not yet handled, each with when it was read (monotonic ns, for the
        # request-queue time metric)
        self.pending: collections.deque[tuple[bytes | bytearray, int]] = collections.deque()
        self.stats = server.stats
        self.parked_ns = 0  # set by the broker: the last request's time parked in purgatory
        self.peer = "?"
        self.client_software: tuple[str, str] | None = None
        # who is on the other end: set by authentication (TLS / SASL), anonymous until then
        self.principal: KafkaPrincipal = ANONYMOUS
        # SASL listeners: the authentication state until authenticated, then None (one attribute
        # check per request); kept while KIP-368 sessions expire (connections.max.reauth.ms)
        self.sasl: SaslSession | None = None
        if security_protocol in SASL_SECURITY_PROTOCOLS:
            self.sasl = SaslSession(
                server.sasl_listeners[listener_name or ""], server.scram_credentials.lookup
            )
            # Kafka's sasl.server.max.receive.size: the bound on frames before authentication
            self.decoder.max_frame_size = min(
                self.decoder.max_frame_size, SASL_SERVER_MAX_RECEIVE_SIZE
            )
        self.last_activity = time.monotonic()
        self.closed = False
        self._worker: asyncio.Task[None] | None = None
        self._reading_paused = False  # by the bound on queued requests
        self._memory_muted = False  # by the memory pool: no memory for the next request
        self._throttle_muted = False  # by a client quota
        self._transport_paused = False  # what the transport was last told
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._sock_fd = -1
        self._send_fd = -1
        self._high = WRITE_BUFFER_HIGH
        # KIP-72: this connection's part of queued.max.request.bytes; None when unbounded (default)
        pool = server.memory_pool
        self.memory = None if pool is None else ConnectionMemory(pool, self._memory_freed)
        self.use_sendfile = False
        self.fetch_sessions: dict[int, FetchSession] = {}
        self._eof = False
        self._out: list[
            bytes | bytearray | memoryview
        ] = []  # answers waiting to be written together
        self._out_size = 0
        # answers that must wait for a deferred one ahead of them, oldest first, and their writer
        # (a list: empty it costs 56 bytes where a deque costs 760, and it never holds more than
        # about MAX_QUEUED_REQUESTS)
        self._answers: list[asyncio.Future[ResponsePieces | None]] = []
        self._answer_writer: asyncio.Task[None] | None = None
        # client quotas (KIP-219): no request is read or handled before this loop time
        self.throttled_until = 0.0

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio subclasses
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            self._sock_fd = sock.fileno()
        tls = self._tls = transport.get_extra_info("sslcontext") is not None
        if (
            tls and self.sasl is None
        ):  # SASL_SSL: the principal comes from SASL, not the certificate
            subject = subject_rfc2253(transport.get_extra_info("peercert"))
            self.peer_certificate_subject = subject
            if subject:
                # the principal of a client certificate, through ssl.principal.mapping.rules
                try:
                    self.principal = self.server.principal_mapper.principal(subject)
                except NoMatchingRule:
                    log.warning(
                        "closing the TLS connection from %s: no ssl.principal.mapping.rules rule "
                        "matches its certificate subject %r",
                        self.peer,
                        subject,
                    )
                    transport.close()
                    return
        self.use_sendfile = (
            self._sock_fd >= 0
            and not tls
            and hasattr(os, "sendfile")
            and self.server.sendfile_enabled
        )
        transport.set_write_buffer_limits(high=self._high, low=self._high // 4)  # type: ignore[attr-defined]
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.slot is not None:
            self.slot.release()
        self.server.connections.discard(self)
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self._send_fd >= 0:
            try:
                os.close(self._send_fd)
            except OSError:
                pass
            self._send_fd = -1
        if self.memory is not None:  # the requests received and queued here will never be handled
            self.memory.close(sum(len(f) for f, _ in self.pending))
        self.pending.clear()
        for fut in self._answers:  # answers nobody will read: stop waiting for them
            fut.cancel()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # the event loop reads with get_buffer() / buffer_updated(): a big request (a produce batch) is
    # received straight into its own bytearray, which produce validates and appends without a copy
    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer()

    def buffer_updated(self, nbytes: int | bytes) -> None:
        """`nbytes` more bytes read into the decoder's buffer (or, from data_received, the bytes
        themselves): whole frames queue up and the request loop starts if it is idle."""
        self.last_activity = time.monotonic()
        frames = self.protocol.receive_frames(nbytes)
        if frames and type(frames[0]) is ProtocolViolation:
            exc = frames[0].frame_too_large
            if exc is not None:
                log.warning(
                    "closing %s: invalid receive (size = %d larger than %d, %s)",
                    self.peer,
                    exc.size,
                    exc.limit,
                    "socket.request.max.bytes"
                    if self.sasl is None or self.sasl.principal is not None
                    else "sasl.server.max.receive.size before SASL authentication",
                )
            else:
                log.warning("closing %s: %s", self.peer, frames[0].reason)
            self.close()
            return
        if self.memory is not None and not self.memory.read(
            frames, self.decoder.pending_frame_size
        ):
            self._memory_muted = True  # KIP-72: no memory for the next request
            self._sync_reading()
        if not frames:
            return
        self.pending.extend(zip(frames, itertools.repeat(time.monotonic_ns())))
        if (
            len(self.pending) + len(self._answers) >= MAX_QUEUED_REQUESTS
            and not self._reading_paused
        ):
            self._reading_paused = True
            self._sync_reading()
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._process())

    def _memory_freed(self) -> None:
        """The memory pool has memory again: take it for the request begun, if any; read on."""
        if (
            not self.closed
            and self.memory is not None
            and self.memory.take(self.decoder.pending_frame_size)
        ):
            self._memory_muted = False
            self._sync_reading()

    def _sync_reading(self) -> None:
        """Tell the transport to read or not: it pauses while any reason holds (queued requests,
        the memory pool, a quota's throttle)."""
        paused = self._reading_paused or self._memory_muted or self._throttle_muted
        if paused is self._transport_paused or self.closed or self.transport is None:
            return
        self._transport_paused = paused
        if paused:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        """Bytes handed over whole (the same path as buffered reads; tests and wrappers use it)."""
        self.buffer_updated(data)

    def eof_received(self) -> bool | None:
        # the client finished sending: answer what is queued, then close (see _process)
        self._eof = True
        if self._worker is None or self._tls:
            return None  # a TLS transport closes on EOF whatever we answer
        return True

    # -- SASL
    def sasl_authenticated(self, session: SaslSession) -> None:
        """The exchange succeeded: requests now run as its principal."""
        assert session.principal is not None
        self.principal = session.principal
        self.decoder.max_frame_size = self.server.config.socket_request_max_bytes
        if session.settings.reauth_ms <= 0:
            self.sasl = None  # nothing left to check per request

    def close_after_failed_authentication(self, session: SaslSession) -> None:
        """Kafka's connection.failed.authentication.delay.ms: the answer goes out, the close waits."""
        session.state = SaslState.FAILED
        delay = session.settings.failed_delay_ms / 1000
        asyncio.get_running_loop().call_later(delay, self.close)

    # -- request loop
    @property
    def busy(self) -> bool:
        return self._worker is not None or self._answer_writer is not None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    async def _process(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            slice_end = loop.time() + YIELD_AFTER_S
            while self.pending and not self.closed:
                if self.throttled_until:
                    delay = self.throttled_until - loop.time()
                    if delay > 0:
                        self._flush_out()
                        await self._muted(delay)
                        continue
                    self.throttled_until = 0.0
                if loop.time() >= slice_end:
                    # let other connections (and woken long polls) run between pipelined requests
                    self._flush_out()
                    await asyncio.sleep(0)
                    slice_end = loop.time() + YIELD_AFTER_S
                    continue  # the connection may have closed (and dropped its queue) meanwhile
                frame, arrived = self.pending.popleft()
                if self._out and (len(frame) < 2 or frame[1] not in QUICK_KEYS or frame[0]):
                    self._flush_out()  # this request may wait: earlier answers go out first
                self._maybe_resume_reading()
                started = time.monotonic_ns()
                self.parked_ns = 0
                try:
                    pieces = await self.server.handle_frame(self, frame)
                except CloseConnection:
                    self.close()
                    return
                finally:
                    if self.memory is not None:  # handled (or dropped): its memory is free
                        self.memory.handled(len(frame))
                handled = time.monotonic_ns()
                key = (frame[0] << 8 | frame[1]) if len(frame) > 1 else -1
                if isinstance(pieces, DeferredResponse):
                    timed = self._timed_answer(
                        pieces.answer, key, arrived, started, handled, self.parked_ns
                    )
                    self._queue_answer(asyncio.ensure_future(timed))
                    continue
                if self._answers:  # a deferred answer is ahead of this one: keep the order
                    self.stats.record_request(
                        key, arrived, started, handled, self.parked_ns, handled, handled
                    )
                    if pieces is not None:
                        done: asyncio.Future[ResponsePieces | None] = loop.create_future()
                        done.set_result(pieces)
                        self._queue_answer(done)
                    continue
                if pieces is None:  # acks=0: nothing to send
                    self.stats.record_request(
                        key, arrived, started, handled, self.parked_ns, handled, handled
                    )
                elif not self.closed:
                    await self._write(pieces)
                    self.stats.record_request(
                        key, arrived, started, handled, self.parked_ns, handled,
                        time.monotonic_ns(),
                    )  # fmt: skip
                    if not self.pending or self._out_size > OUT_COALESCE_BYTES:
                        self._flush_out()
                    if self._write_paused and not self.closed:
                        await self._wait_drained()
                self.last_activity = time.monotonic()
            self._flush_out()
        except (ConnectionError, OSError) as exc:
            log.info("connection %s dropped while answering: %s", self.peer, exc)
            self.close()
        except Exception:
            log.exception("internal error serving %s; closing the connection", self.peer)
            self.close()
        finally:
            self._worker = None
            if self.transport is not None and self.transport.is_closing() is False and self.closed:
                self.transport.close()
        if self.pending and not self.closed:  # frames that arrived as we finished
            self._worker = asyncio.get_running_loop().create_task(self._process())
        elif self._eof and self._answer_writer is None:
            self.close()

    def mute_for(self, throttle_ms: int) -> None:
        """A quota throttled this client: read and handle nothing more for `throttle_ms`."""
        until = asyncio.get_running_loop().time() + throttle_ms / 1000
        self.throttled_until = max(self.throttled_until, until)

    async def _muted(self, delay: float) -> None:
        self._throttle_muted = True
        self._sync_reading()
        try:
            await asyncio.sleep(delay)
        finally:
            self._throttle_muted = False
            self._sync_reading()

    def _maybe_resume_reading(self) -> None:
        if (
            self._reading_paused
            and len(self.pending) + len(self._answers) < MAX_QUEUED_REQUESTS // 2
            and not self.closed
        ):
            self._reading_paused = False
            self._sync_reading()

    async def _timed_answer(
        self, answer: Awaitable[ResponsePieces | None], key: int, arrived: int, started: int,
        handled: int, parked: int,
    ) -> ResponsePieces | None:  # fmt: skip
        """A deferred answer, its request counted once it is ready (its wait is remote time; the
        write of a deferred answer is not timed)."""
        pieces = await answer
        done = time.monotonic_ns()
        self.stats.record_request(key, arrived, started, handled, parked, done, done)
        return pieces

    def _queue_answer(self, fut: asyncio.Future[ResponsePieces | None]) -> None:
        self._answers.append(fut)
        if self._answer_writer is None:
            self._answer_writer = asyncio.get_running_loop().create_task(self._write_answers())

    async def _write_answers(self) -> None:
        """Write queued answers in request order, each once it is ready; an answer leaves the
        queue only after it is written, so nothing else writes until the queue is empty."""
        try:
            while self._answers and not self.closed:
                try:
                    pieces = await self._answers[0]
                except asyncio.CancelledError:
                    if not self.closed:
                        raise
                    break  # connection_lost cancelled the waits: nobody is listening
                if pieces is not None and not self.closed:
                    await self._write(pieces)
                    if len(self._answers) < 2 or not self._answers[1].done():
                        self._flush_out()
                    if self._write_paused and not self.closed:
                        await self._wait_drained()
                self._answers.pop(0)
                self._maybe_resume_reading()
            self._flush_out()
        except CloseConnection:  # a deferred answer that cannot be given (logged where raised)
            self.close()
        except (ConnectionError, OSError) as exc:
            log.info("connection %s dropped while answering: %s", self.peer, exc)
            self.close()
        except Exception:
            log.exception("internal error serving %s; closing the connection", self.peer)
            self.close()
        finally:
            self._answer_writer = None
            if self.closed:
                for fut in self._answers:
                    fut.cancel()
                self._answers.clear()
        if self._eof and self._worker is None and not self.closed:
            self.close()

    def _flush_out(self) -> None:
        """Hand the coalesced answers of pipelined requests to the transport in one write."""
        if not self._out or self.transport is None or self.closed:
            self._out.clear()
            self._out_size = 0
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self._out_size = 0
        self.transport.write(data)

    async def _wait_drained(self) -> None:
        loop = asyncio.get_running_loop()
        self._drained = loop.create_future()
        if not self._write_paused or self.closed:
            return
        await self._drained

    async def _write(self, pieces: ResponsePieces) -> None:
        for piece in pieces:
            if self.closed:
                return
            if isinstance(piece, bytes | bytearray | memoryview):
                self._out.append(piece)
                self._out_size += len(piece)
                continue
            if piece.length > SENDFILE_MIN_BYTES:
                self._flush_out()
                if self.use_sendfile:
                    await self._sendfile(piece)
                else:
                    await self._write_region(piece)
                continue
            # small regions (or no sendfile): one pread, sent with the surrounding bytes in one write
            data = piece.read_bytes()
            if len(data) != piece.length:
                raise ConnectionError("file region shrank before it could be sent")
            if self.use_sendfile:
                SendfileStats.inline_bytes += len(data)
            else:
                SendfileStats.fallback_bytes += len(data)
            self._out.append(data)
            self._out_size += len(data)

    async def _write_region(self, region: FileRegion) -> None:
        """A file region through the transport (TLS, or sendfile off): big preads handed to the
        transport one by one, so memory stays bounded and no join copies the data again."""
        assert self.transport is not None
        pos, left = region.position, region.length
        while left > 0 and not self.closed:
            n = min(left, REGION_CHUNK_BYTES)
            data = os.pread(region.fileno, n, pos)
            if len(data) != n:
                raise ConnectionError("file region shrank before it could be sent")
            self.transport.write(data)
            SendfileStats.fallback_bytes += n
            pos += n
            left -= n
            if self._write_paused and not self.closed:
                await self._wait_drained()

    async def _flush_transport(self) -> None:
        """Wait until the transport has handed every buffered byte to the kernel (order before sendfile)."""
        assert self.transport is not None
        if self.transport.get_write_buffer_size() == 0:
            return
        # with both limits at 0 the transport pauses us until its buffer is empty, then resumes us
        self.transport.set_write_buffer_limits(high=0, low=0)
        try:
            while self.transport.get_write_buffer_size() > 0 and not self.closed:
                if self._write_paused:
                    await self._wait_drained()
                else:  # a loop that did not pause us on the new limits: poll briefly instead
                    await asyncio.sleep(0.0005)
        finally:
            if not self.closed:
                self.transport.set_write_buffer_limits(high=self._high, low=self._high // 4)

    async def _sendfile(self, region: FileRegion) -> None:
        await self._flush_transport()
        if self.closed:
            return
        if self._send_fd < 0:
            self._send_fd = os.dup(self._sock_fd)
        stall_s = max(1.0, self.server.config.connections_max_idle_ms / 1000)
        await sendfile_region(self._send_fd, region, stall_s)
