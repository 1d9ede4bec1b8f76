"""The request path of one frame: the connection's ServerConnection reads it into an event, the dispatch
table's handler answers it, storage errors and client quotas are applied, and the answer goes out as pieces.

The protocol work (framing, headers, SASL v0 raw tokens, the KIP-511 downgrade, throttle time in the response)
is protocol.server_connection's; this module only decides what to do with each event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafkalite.broker.config.log_config import log_request, request_log
from kafkalite.broker.context import DeferredResponse, RequestContext, ResponsePieces
from kafkalite.broker.dispatch import HandlerEntry
from kafkalite.broker.network.connection import CloseConnection, Connection
from kafkalite.broker.network.request_throttle import (
    fetch_throttle_ms,
    request_throttle_ms,
    throttle,
)
from kafkalite.broker.security.client_quotas import ClientQuotas
from kafkalite.broker.security.sasl_auth import SaslSession, SaslState
from kafkalite.broker.storage_errors import storage_error_answer
from kafkalite.protocol.schema import Message
from kafkalite.protocol.server_connection import (
    AnsweredByConnection,
    Event,
    ProtocolViolation,
    RequestReceived,
    SaslTokenReceived,
    response_size,
)
from kafkalite.security.sasl import IllegalSaslStateError, SaslAuthenticationError

log = logging.getLogger("kafkalite.broker")

# what a connection gets for a frame: pieces to write, pieces to write later, or nothing
Answer = ResponsePieces | DeferredResponse[ResponsePieces | None] | None
# what a handler answers as the dispatch table holds it (each module types its own): a response for
# its API's encoder, a SlicedResponse, a DeferredResponse of one, or None
Response = Any  # the codec boundary: no one handler's answer type is known here


class RequestHandler:
    """Answers the frames of every connection: `handle_frame(conn, frame)` is what a Connection
    awaits for each request, in order. `context` makes the RequestContext a handler sees."""

    __slots__ = ("quotas", "context")

    def __init__(
        self,
        quotas: ClientQuotas,
        context: Callable[[RequestReceived[HandlerEntry], Connection], RequestContext],
    ) -> None:
        self.quotas = quotas
        self.context = context

    async def handle_frame(self, conn: Connection, frame: bytes | bytearray) -> Answer:
        """One frame through the protocol state; a request is handled here, in this frame (no
        forwarding hop: this is the produce path's), its handler's answer encoded to pieces."""
        sasl = conn.sasl
        protocol = conn.protocol
        if sasl is None:
            event = protocol.read_frame(frame)
        else:
            if type(frame) is bytearray:
                frame = bytes(frame)
            if sasl.state is SaslState.RAW_TOKEN:
                protocol.start_raw_tokens()
            else:
                protocol.end_raw_tokens()
            event = protocol.read_frame(frame, sasl.rejection)
        if type(event) is not RequestReceived:
            return self._not_a_request(conn, sasl, event)
        entry = event.served
        ctx = self.context(event, conn)
        hand_encoded = True
        result: Response
        try:
            result = await entry.handle(ctx, event.body)
        except ConnectionError:
            raise
        except OSError as exc:  # the handler's file I/O, not this client's socket
            hand_encoded = False  # the error answer is a schema message, not a hot-path result
            result = _storage_error(conn, event, exc)
        frame = event.frame
        if request_log.isEnabledFor(logging.DEBUG):
            log_request(ctx, entry.api.name, len(frame))
        if ctx.parked_ns:
            conn.parked_ns = ctx.parked_ns  # remote time in the request metrics
        key = event.api_key
        quotas = self.quotas
        throttle_ms = request_throttle_ms(quotas, ctx, key, len(frame)) if quotas.active else 0
        if isinstance(result, DeferredResponse):
            return DeferredResponse(
                self._answer_later(conn, event, result, throttle_ms, hand_encoded)
            )
        if result is None:
            return None
        pieces = protocol.send_response(
            event, result, throttle_ms=throttle_ms, hand_encoded=hand_encoded
        )
        if quotas.active:
            fetch_ms = fetch_throttle_ms(quotas, ctx, key, response_size(pieces))
            if fetch_ms > throttle_ms:
                # the answer says the longer throttle: encoded again with it (throttled answers only)
                throttle_ms = fetch_ms
                pieces = protocol.send_response(
                    event, result, throttle_ms=throttle_ms, hand_encoded=hand_encoded
                )
        if throttle_ms:
            await throttle(conn, key, event.api_version, throttle_ms)
        return pieces

    def _not_a_request(
        self,
        conn: Connection,
        sasl: SaslSession | None,
        event: Event[HandlerEntry],
    ) -> ResponsePieces | None:
        """A frame the protocol answered itself, a raw SASL token, or a violation (the close)."""
        if type(event) is AnsweredByConnection:
            return [event.data]
        if type(event) is SaslTokenReceived:
            assert sasl is not None
            return self._sasl_raw_token(conn, sasl, event.token)
        assert type(event) is ProtocolViolation
        if event.refused:
            log.warning(
                "closing %s on SASL listener %s: %s", conn.peer, conn.listener_name, event.reason
            )
        else:
            log.warning("closing %s: %s", conn.peer, event.reason)
        raise CloseConnection

    async def _answer_later(
        self,
        conn: Connection,
        event: RequestReceived[HandlerEntry],
        deferred: DeferredResponse[Response],
        throttle_ms: int,
        hand_encoded: bool,
    ) -> ResponsePieces | None:
        try:
            result = await deferred.answer
        except ConnectionError:
            raise
        except OSError as exc:  # completing the request hit storage, not this client's socket
            result = _storage_error(conn, event, exc)
            hand_encoded = False
        if result is None:
            return None
        pieces = conn.protocol.send_response(
            event, result, throttle_ms=throttle_ms, hand_encoded=hand_encoded
        )
        if throttle_ms:
            await throttle(conn, event.api_key, event.api_version, throttle_ms)
        return pieces

    def _sasl_raw_token(
        self, conn: Connection, sasl: SaslSession, token: bytes
    ) -> ResponsePieces | None:
        """After SaslHandshake v0 (KIP-152's legacy form) each frame is a bare SASL token and so is
        each answer; a failure gets no answer, only the (delayed) close."""
        try:
            answer = sasl.authenticate(token)
        except (SaslAuthenticationError, IllegalSaslStateError) as exc:
            log.warning(
                "%s on listener %s failed SASL/%s authentication as %s: %s",
                conn.peer,
                conn.listener_name,
                sasl.mechanism,
                sasl.username or "an unnamed user",
                exc,
            )
            conn.close_after_failed_authentication(sasl)
            return None
        if sasl.state is SaslState.AUTHENTICATED:
            conn.protocol.end_raw_tokens()
            conn.sasl_authenticated(sasl)
            log.info(
                "%s authenticated as %s with SASL/%s (handshake v0) on listener %s",
                conn.peer,
                conn.principal,
                sasl.mechanism,
                conn.listener_name,
            )
        return [conn.protocol.send_sasl_token(answer)]


def _storage_error(
    conn: Connection, event: RequestReceived[HandlerEntry], exc: OSError
) -> Message | None:
    """KAFKA_STORAGE_ERROR (or REQUEST_TIMED_OUT) for every entry of the request (None: no answer;
    CloseConnection when its response cannot say so)."""
    return storage_error_answer(
        event.served.api,
        event.api_version,
        event.body,
        conn.peer,
        event.header.client_id,
        exc,
        event.frame,
        event.body_offset,
    )
