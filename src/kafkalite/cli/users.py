"""`kafkalite users add|list|delete`: SCRAM users through AlterUserScramCredentials and
DescribeUserScramCredentials (the salted password is computed here; the password never leaves).
"""

from __future__ import annotations

import argparse
import getpass
import json
import secrets
from typing import Any

from kafkalite.cli.wire import CliError, WireClient, add_login_arguments, login_from_arguments
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.scram import (
    SCRAM_MECHANISM_IDS,
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from kafkalite.security.scram import SCRAM_MECHANISMS, salted_password

_NAMES = {v: k for k, v in SCRAM_MECHANISM_IDS.items()}


def _mechanism(text: str) -> str:
    mech = text.upper()
    if mech not in SCRAM_MECHANISMS:
        raise CliError(f"unknown SCRAM mechanism {text!r}: one of {', '.join(SCRAM_MECHANISMS)}")
    return mech


def _alter_results(resp: Any, what: str) -> None:
    for r in resp.results:
        if r.error_code:
            raise CliError(
                f"{what} {r.user}: {ErrorCode(r.error_code).name} ({r.error_message or ''})"
            )
        print(f"{what} {r.user}: done")


def _add(c: WireClient, a: argparse.Namespace) -> None:
    password = a.password
    if password is None:
        password = getpass.getpass(f"Password for {a.user}: ")
        if getpass.getpass("Again: ") != password:
            raise CliError("the passwords do not match")
    if not password:
        raise CliError("the password must not be empty")
    req_cls: Any = AlterUserScramCredentialsRequest
    upserts = []
    for text in a.mechanism or ["SCRAM-SHA-256"]:
        mech = SCRAM_MECHANISMS[_mechanism(text)]
        salt = secrets.token_bytes(32)
        upserts.append(
            req_cls.ScramCredentialUpsertion(
                name=a.user,
                mechanism=SCRAM_MECHANISM_IDS[mech.mechanism_name],
                iterations=a.iterations,
                salt=salt,
                salted_password=salted_password(mech, password, salt, a.iterations),
            )
        )
    _alter_results(c.send(req_cls(deletions=[], upsertions=upserts)), "user")


def _delete(c: WireClient, a: argparse.Namespace) -> None:
    req_cls: Any = AlterUserScramCredentialsRequest
    deletions = [
        req_cls.ScramCredentialDeletion(name=a.user, mechanism=SCRAM_MECHANISM_IDS[_mechanism(m)])
        for m in a.mechanism or list(SCRAM_MECHANISMS)
    ]
    if not a.mechanism:  # every mechanism the user has
        described = _describe(c, [a.user])
        have = {m for r in described for m in r[1]}
        deletions = [d for d in deletions if _NAMES[d.mechanism] in have]
    _alter_results(c.send(req_cls(deletions=deletions, upsertions=[])), "deleted user")


def _describe(c: WireClient, users: list[str] | None) -> list[tuple[str, dict[str, int]]]:
    req_cls: Any = DescribeUserScramCredentialsRequest
    names = [req_cls.UserName(name=u) for u in users] if users else None
    resp = c.send(req_cls(users=names))
    if resp.error_code:
        raise CliError(f"listing users: {ErrorCode(resp.error_code).name} ({resp.error_message})")
    out = []
    for r in resp.results:
        if r.error_code:
            raise CliError(f"user {r.user}: {ErrorCode(r.error_code).name} ({r.error_message})")
        out.append(
            (r.user, {_NAMES.get(i.mechanism, "?"): i.iterations for i in r.credential_infos})
        )
    return out


def _list(c: WireClient, a: argparse.Namespace) -> None:
    if getattr(a, "output", "text") == "json":
        doc = [
            {
                "user": user,
                "mechanisms": [{"mechanism": m, "iterations": n} for m, n in sorted(creds.items())],
            }
            for user, creds in _describe(c, a.user or None)
        ]
        print(json.dumps(doc))
        return
    for user, creds in _describe(c, a.user or None):
        infos = ", ".join(f"{m} (iterations={n})" for m, n in sorted(creds.items()))
        print(f"{user}: {infos}")


def _run(a: argparse.Namespace) -> int:
    with WireClient(a.bootstrap_server, sasl_login=login_from_arguments(a)) as c:
        {"add": _add, "list": _list, "delete": _delete}[a.users_command](c, a)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("users", help="add, list and delete SCRAM users (like kafka-configs.sh)")
    users_sub = p.add_subparsers(dest="users_command", required=True)
    for name, text in (
        ("add", "add a SCRAM user, or set a new password"),
        ("list", "list users and their SCRAM mechanisms"),
        ("delete", "delete a user's SCRAM credentials"),
    ):
        s = users_sub.add_parser(name, help=text)
        add_login_arguments(s)
        if name == "list":
            s.add_argument("user", nargs="*")
            s.add_argument("--output", choices=("text", "json"), default="text")
        else:
            s.add_argument("user")
            s.add_argument(
                "--mechanism",
                action="append",
                metavar="SCRAM-SHA-256|SCRAM-SHA-512",
                help="repeatable; add: SCRAM-SHA-256 by default; delete: every one the user has",
            )
        if name == "add":
            s.add_argument("--password", help="prompted for when not given")
            s.add_argument("--iterations", type=int, default=4096)
        s.set_defaults(func=_run)
