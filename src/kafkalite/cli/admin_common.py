"""Shared pieces of the Kafka-tool-style admin commands (topics, configs, get-offsets, log-dirs, ...):
connection flags with --command-config, output as text, rich tables or JSON, and exit code 2 on errors.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from kafkalite.cli.group_ops import Cluster
from kafkalite.cli.wire import EXIT_ERROR, CliError, WireClient
from kafkalite.security.mechanisms import SaslLogin

_JAAS_FIELD = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;]+))""")
_JAAS_MECHANISMS = {"PlainLoginModule": "PLAIN", "ScramLoginModule": "SCRAM-SHA-256"}


def exits_2(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a command; a CliError becomes one 'error: ...' line on stderr and exit code 2."""

    @functools.wraps(fn)
    def run(a: argparse.Namespace) -> int:
        try:
            return fn(a)
        except CliError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_ERROR

    return run


def one_line_usage_errors(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A bad flag or value exits with code 2 and one line (not the usage block) on stderr."""

    def error(message: str) -> NoReturn:
        print(f"error: {p.prog}: {message} (see {p.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)

    setattr(p, "error", error)  # noqa: B010 (an instance attribute, not a method override)
    return p


class OneLineErrorParser(argparse.ArgumentParser):
    """The `kafkalite` parser and, through add_subparsers, every subcommand's: a bad flag or value is one
    `error:` line naming the command (not the usage block) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file: key=value or key: value lines, # and ! comments, \\ continuations."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
        if m is None:
            props[line] = ""
        else:
            props[m.group(1)] = m.group(2)
    return props


def login_from_properties(props: dict[str, str]) -> SaslLogin | None:
    """Map client properties (security.protocol, sasl.mechanism, sasl.jaas.config or
    sasl.username/sasl.password) onto the SASL login WireClient supports."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol in ("SSL", "SASL_SSL"):
        raise CliError(
            f"security.protocol={protocol}: the kafkalite command line speaks PLAINTEXT and "
            "SASL_PLAINTEXT only"
        )
    if protocol not in ("PLAINTEXT", "SASL_PLAINTEXT"):
        raise CliError(f"unknown security.protocol {protocol!r}")
    if protocol == "PLAINTEXT":
        return None
    mechanism = props.get("sasl.mechanism", "").upper()
    user, password = props.get("sasl.username"), props.get("sasl.password")
    jaas = props.get("sasl.jaas.config")
    if jaas:
        fields = {
            m.group(1): next(g for g in m.groups()[1:] if g is not None)
            for m in _JAAS_FIELD.finditer(jaas)
        }
        user, password = fields.get("username", user), fields.get("password", password)
        if not mechanism:
            mechanism = next((v for k, v in _JAAS_MECHANISMS.items() if k in jaas), "")
    if user is None or password is None:
        raise CliError(
            "SASL_PLAINTEXT needs a user name and password: sasl.jaas.config with "
            'username="..." password="...", or sasl.username and sasl.password'
        )
    return SaslLogin(mechanism or "PLAIN", user, password)


def add_connection_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT")
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties: security.protocol, sasl.mechanism, sasl.jaas.config",
    )
    p.add_argument("--sasl-mechanism", help="to log in to a SASL listener (default PLAIN)")
    p.add_argument("--sasl-username")
    p.add_argument("--sasl-password", help="prompted for when --sasl-username is given")


def login_for(a: argparse.Namespace) -> SaslLogin | None:
    """The SASL login of --command-config, or of the --sasl-* flags (which win)."""
    login = None
    if getattr(a, "command_config", None):
        login = login_from_properties(read_properties(a.command_config))
    if getattr(a, "sasl_username", None):
        import getpass

        password = a.sasl_password
        if password is None:
            password = getpass.getpass(f"SASL password of {a.sasl_username}: ")
        login = SaslLogin((a.sasl_mechanism or "PLAIN").upper(), a.sasl_username, password)
    return login


def connect(a: argparse.Namespace) -> WireClient:
    """The WireClient for --bootstrap-server, logged in per --command-config or --sasl-* flags."""
    return WireClient(a.bootstrap_server, sasl_login=login_for(a))


def connect_cluster(a: argparse.Namespace) -> LoginCluster:
    """connect(), as a Cluster reaching the other brokers with the same login; close() closes all."""
    login = login_for(a)
    return LoginCluster(WireClient(a.bootstrap_server, sasl_login=login), login)


class LoginCluster(Cluster):
    """A Cluster whose connections to the other brokers log in as the bootstrap connection did."""

    def __init__(self, bootstrap: WireClient, login: SaslLogin | None) -> None:
        super().__init__(bootstrap)
        self.login = login

    def connect(self, host: str, port: int) -> WireClient:
        c = self._conns.get((host, port))
        if c is None:
            c = self._conns[(host, port)] = WireClient(
                f"{host}:{port}", timeout=self.bootstrap.timeout, sasl_login=self.login
            )
        return c

    def close(self) -> None:
        super().close()
        self.bootstrap.close()


def add_output_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="json: one JSON document on stdout",
    )


def print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=None, separators=(",", ":")))


def print_table(columns: list[str], rows: list[list[Any]], output: str = "text") -> None:
    """JSON objects, a rich table on a terminal, else tab-separated lines with a header."""
    if output == "json":
        print_json([dict(zip(columns, r)) for r in rows])
        return
    cells = [["-" if c is None else str(c) for c in r] for r in rows]
    if sys.stdout.isatty():
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            pass
        else:
            table = Table()
            for col in columns:
                table.add_column(col, no_wrap=True)
            for r in cells:
                table.add_row(*r)
            Console().print(table)
            return
    print("\t".join(columns))
    for r in cells:
        print("\t".join(r))


def split_list(items: list[str] | None) -> list[str]:
    """Comma-separated and repeated values in one list (--topic-list a,b --topic-list c)."""
    return [x.strip() for item in items or [] for x in item.split(",") if x.strip()]
