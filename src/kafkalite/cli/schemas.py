"""`kafkalite schemas list|get|register|delete|compat|config`: the broker's Schema Registry over its
HTTP listener (Confluent's API), for people and scripts; errors are the registry's code and message.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from kafkalite.cli.wire import CliError

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
DEFAULT_URL = "http://127.0.0.1:8080"


def _call(a: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    url = a.registry_url.rstrip("/") + path
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Accept", MEDIA_TYPE)
    if data is not None:
        req.add_header("Content-Type", MEDIA_TYPE)
    if a.user:
        user, _, password = a.user.partition(":")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=a.timeout) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        try:
            detail = json.loads(err.read())
            raise CliError(f"{detail['error_code']}: {detail['message']}") from None
        except (ValueError, KeyError, TypeError):
            raise CliError(f"HTTP {err.code} {err.reason} from {url}") from None
    except OSError as exc:
        raise CliError(f"cannot reach the registry at {a.registry_url}: {exc}") from None


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _schema_body(a: argparse.Namespace) -> dict[str, Any]:
    if (a.schema is None) == (a.file is None):
        raise CliError("give the schema with exactly one of --schema TEXT or --file PATH")
    try:
        text = a.schema if a.schema is not None else Path(a.file).read_text()
    except OSError as exc:
        raise CliError(f"cannot read {a.file}: {exc}") from None
    body: dict[str, Any] = {"schema": text}
    if a.type.upper() != "AVRO":
        body["schemaType"] = a.type.upper()
    refs = []
    for item in a.reference or []:
        name, sep, target = item.rpartition("=")
        subject, sep2, version = target.rpartition(":")
        if not sep or not sep2 or not version.isdigit():
            raise CliError(f"--reference {item!r}: expected NAME=SUBJECT:VERSION")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2) if not isinstance(value, str) else value)


def _list(a: argparse.Namespace) -> None:
    query = urllib.parse.urlencode({"deleted": str(a.deleted).lower(), "subjectPrefix": a.prefix})
    for subject in _call(a, "GET", f"/subjects?{query}"):
        print(subject)


def _get(a: argparse.Namespace) -> None:
    if a.id is not None:
        body = _call(a, "GET", f"/schemas/ids/{a.id}")
    elif a.subject:
        body = _call(a, "GET", f"/subjects/{_quote(a.subject)}/versions/{a.version}")
    else:
        raise CliError("give a SUBJECT (with --version) or --id")
    if a.text_only:
        schema = body["schema"]
        try:
            print(json.dumps(json.loads(schema), indent=2))
        except ValueError:
            print(schema)
    else:
        _print(body)


def _register(a: argparse.Namespace) -> None:
    query = "?normalize=true" if a.normalize else ""
    body = _call(a, "POST", f"/subjects/{_quote(a.subject)}/versions{query}", _schema_body(a))
    print(f"registered under {a.subject}: id {body['id']}")


def _delete(a: argparse.Namespace) -> None:
    query = "?permanent=true" if a.permanent else ""
    if a.version is None:
        versions = _call(a, "DELETE", f"/subjects/{_quote(a.subject)}{query}")
        print(f"deleted {a.subject} versions {versions}{' permanently' if a.permanent else ''}")
    else:
        version = _call(a, "DELETE", f"/subjects/{_quote(a.subject)}/versions/{a.version}{query}")
        print(f"deleted {a.subject} version {version}{' permanently' if a.permanent else ''}")


def _compat(a: argparse.Namespace) -> int:
    path = f"/compatibility/subjects/{_quote(a.subject)}/versions"
    if a.version != "all":
        path += f"/{a.version}"
    body = _call(a, "POST", path + "?verbose=true", _schema_body(a))
    if body["is_compatible"]:
        print("compatible")
        return 0
    print("incompatible", file=sys.stderr)
    for message in body.get("messages") or []:
        print(f"  {message}", file=sys.stderr)
    return 1


def _config(a: argparse.Namespace) -> None:
    path = "/config" + (f"/{_quote(a.subject)}" if a.subject else "")
    if a.set is not None:
        body = _call(a, "PUT", path, {"compatibility": a.set.upper()})
        print(f"compatibility {body['compatibility']}")
    else:
        query = "?defaultToGlobal=true" if a.subject else ""
        print(_call(a, "GET", path + query)["compatibilityLevel"])


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "schemas",
        help="the Schema Registry: list, get, register, delete, compat, config",
        description="The broker's Schema Registry through its HTTP listener. `compat` exits 1 when "
        "the schema is incompatible.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--registry-url", default=DEFAULT_URL, help=f"default {DEFAULT_URL}")
    common.add_argument("--user", metavar="NAME:PASSWORD", help="HTTP Basic credentials")
    common.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    schema = argparse.ArgumentParser(add_help=False)
    schema.add_argument("--schema", help="the schema's text")
    schema.add_argument("--file", help="a file holding the schema")
    schema.add_argument("--type", default="AVRO", choices=["AVRO", "JSON", "PROTOBUF", "avro", "json", "protobuf"])  # fmt: skip
    schema.add_argument("--reference", action="append", metavar="NAME=SUBJECT:VERSION")
    ops = p.add_subparsers(dest="action", required=True)
    s = ops.add_parser("list", parents=[common], help="subjects")
    s.add_argument("--deleted", action="store_true", help="soft-deleted ones too")
    s.add_argument("--prefix", default="", help="only subjects starting with this")
    s.set_defaults(func=_list)
    s = ops.add_parser("get", parents=[common], help="a subject's version, or a schema by id")
    s.add_argument("subject", nargs="?")
    s.add_argument("--version", default="latest")
    s.add_argument("--id", type=int)
    s.add_argument("--text-only", action="store_true", help="print the schema's text only")
    s.set_defaults(func=_get)
    s = ops.add_parser("register", parents=[common, schema], help="register a schema")
    s.add_argument("subject")
    s.add_argument("--normalize", action="store_true")
    s.set_defaults(func=_register)
    s = ops.add_parser("delete", parents=[common], help="delete a subject or one version")
    s.add_argument("subject")
    s.add_argument("--version")
    s.add_argument("--permanent", action="store_true", help="after a soft delete: for good")
    s.set_defaults(func=_delete)
    s = ops.add_parser("compat", parents=[common, schema], help="test a schema's compatibility")
    s.add_argument("subject")
    s.add_argument("--version", default="latest", help="a version, latest, or all")
    s.set_defaults(func=_compat)
    s = ops.add_parser("config", parents=[common], help="get or set a compatibility level")
    s.add_argument("subject", nargs="?", help="none: the global level")
    s.add_argument("--set", metavar="LEVEL", help="NONE, BACKWARD, FORWARD, FULL (+ _TRANSITIVE)")
    s.set_defaults(func=_config)
