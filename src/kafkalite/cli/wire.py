"""A small blocking Kafka-protocol connection for the CLI: negotiate versions, send a request, read its response.

One broker, one socket; enough for `kafkalite topics|produce|consume` against kafkalite or any Kafka broker.
"""

from __future__ import annotations

import argparse
import getpass
import socket
from typing import Any, Literal, TypeVar, cast, overload

import kafkalite.protocol.messages  # noqa: F401
from kafkalite.protocol.client_connection import ClientConnection, ProtocolError
from kafkalite.protocol.messages.api_versions import ApiVersionsRequest
from kafkalite.protocol.messages.metadata import MetadataRequest
from kafkalite.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kafkalite.protocol.schema import APIS, Request, Response
from kafkalite.security.mechanisms import SaslClientExchange, SaslLogin
from kafkalite.security.sasl import SaslAuthenticationError

_Resp = TypeVar("_Resp", bound=Response)
_RECV_MIN = 1 << 16  # a receive asks for at least this much (a response's length prefix is 4 bytes)
_RECV_MAX = 1 << 20


EXIT_ERROR = 2  # every kafkalite subcommand's exit status for an error (0 success, 130 Ctrl-C)


class CliError(Exception):
    """An error to print for a person (no traceback): one `error:` line on stderr, exit status 2."""


def parse_bootstrap(servers: str) -> tuple[str, int]:
    first = servers.split(",")[0].strip()
    if "://" in first:
        first = first.split("://", 1)[1]
    host, _, port = first.rpartition(":")
    if not port.isdigit():
        raise CliError(f"bootstrap server {servers!r} must look like host:port")
    return host.strip("[]") or "127.0.0.1", int(port)


def add_login_arguments(parser: argparse.ArgumentParser) -> None:
    """--bootstrap-server and the SASL login options of admin commands."""
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--sasl-mechanism", default="PLAIN", help="to log in to a SASL listener")
    parser.add_argument("--sasl-username")
    parser.add_argument("--sasl-password", help="prompted for when --sasl-username is given")


def login_from_arguments(a: argparse.Namespace) -> SaslLogin | None:
    if not a.sasl_username:
        return None
    password = a.sasl_password
    if password is None:
        password = getpass.getpass(f"SASL password of {a.sasl_username}: ")
    return SaslLogin(a.sasl_mechanism.upper(), a.sasl_username, password)


class WireClient:
    """A blocking socket driving the sans-IO ClientConnection: one request at a time, answered in turn."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout: float = 30.0,
        client_id: str = "kafkalite-cli",
        sasl_login: SaslLogin | None = None,
    ) -> None:
        self.host, self.port = parse_bootstrap(bootstrap)
        self.timeout = timeout
        self.client_id = client_id
        try:
            self.sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except OSError as exc:
            raise CliError(
                f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}"
            ) from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn = ClientConnection(client_id)
        self.versions: dict[int, tuple[int, int]] = {}
        resp = self.send(ApiVersionsRequest(), version=0)
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        if sasl_login is not None:
            self.authenticate(sasl_login)

    def authenticate(self, login: SaslLogin) -> None:
        """SaslHandshake v1 and SaslAuthenticate (a SASL_PLAINTEXT listener)."""
        hs = self.send(SaslHandshakeRequest(mechanism=login.mechanism), version=1)
        if hs.error_code:
            raise CliError(
                f"the broker refused SASL mechanism {login.mechanism} "
                f"(enabled: {', '.join(hs.mechanisms) or 'none'})"
            )
        exchange = SaslClientExchange(login)
        token: bytes | None = exchange.first_token()
        while token is not None:
            resp = self.send(SaslAuthenticateRequest(auth_bytes=token))
            if resp.error_code:
                raise CliError(f"SASL authentication failed: {resp.error_message}")
            try:
                token = exchange.next_token(bytes(resp.auth_bytes))
            except SaslAuthenticationError as exc:
                raise CliError(f"SASL authentication failed: {exc}") from None

    def close(self) -> None:
        self._conn.close()
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def version_for(self, api_key: int, cap: int | None = None) -> int:
        api = APIS[api_key]
        lo, hi = self.versions.get(api_key, (-1, -1))
        top = min(hi, api.max_version, cap if cap is not None else 1 << 15)
        if top < max(lo, api.min_version):
            raise CliError(f"the broker does not support {api.name}")
        return top

    @overload
    def send(
        self,
        request: Request[_Resp],
        *,
        version: int | None = None,
        expect_response: Literal[True] = True,
    ) -> _Resp: ...
    @overload
    def send(
        self, request: Request[_Resp], *, version: int | None = None, expect_response: bool
    ) -> _Resp | None: ...
    def send(
        self, request: Request[_Resp], *, version: int | None = None, expect_response: bool = True
    ) -> _Resp | None:
        v = self.version_for(request.API_KEY) if version is None else version
        where = f"{self.host}:{self.port}"
        try:
            corr, frame = self._conn.send_request(request, v, expect_response=expect_response)
        except ProtocolError as exc:
            raise CliError(f"the connection to {where} cannot be used: {exc}") from None
        self.sock.sendall(frame)
        if not expect_response:
            return None
        while True:
            want = min(max(self._conn.bytes_needed, _RECV_MIN), _RECV_MAX)
            chunk = self.sock.recv(want)
            if not chunk:
                raise CliError(f"the broker at {where} closed the connection")
            try:
                responses = self._conn.receive_data(chunk)
            except ProtocolError as exc:
                raise CliError(f"the broker at {where} broke the protocol: {exc}") from None
            for resp in responses:
                # an earlier request's late answer (its caller timed out) is skipped
                if resp.correlation_id == corr:
                    return cast("_Resp", resp.body)  # decoded as request.RESPONSE

    # -- helpers used by several commands
    def metadata(self, topics: list[str] | None, auto_create: bool = False) -> Any:
        req_cls = MetadataRequest
        t = None if topics is None else [req_cls.MetadataRequestTopic(name=n) for n in topics]
        return self.send(req_cls(topics=t, allow_auto_topic_creation=auto_create))

    def partitions_of(self, topic: str, auto_create: bool = False) -> int:
        md = self.metadata([topic], auto_create)
        for t in md.topics:
            if t.name == topic:
                if t.error_code:
                    from kafkalite.protocol.errors import ErrorCode

                    raise CliError(f"topic {topic}: {ErrorCode(t.error_code).name}")
                return len(t.partitions)
        raise CliError(f"topic {topic} not found")


def murmur2(data: bytes) -> int:
    """Kafka's default partitioner hash (murmur2, seed 0x9747b28c)."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[i * 4 : i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length & 3
    tail = data[n4 * 4 :]
    if rest == 3:
        h ^= tail[2] << 16
    if rest >= 2:
        h ^= tail[1] << 8
    if rest >= 1:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions
