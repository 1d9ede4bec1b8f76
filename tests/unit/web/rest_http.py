"""A tiny JSON-over-HTTP client for the REST v3 tests: call(method, url, body) -> (status, body).

Errors come back as values (status and the REST Proxy's error body), never as exceptions.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any


def call(
    method: str,
    url: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    auth: tuple[str, str] | None = None,
) -> tuple[int, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as err:
        text = err.read()
        try:
            return err.code, json.loads(text) if text else None
        except ValueError:
            return err.code, text.decode(errors="replace")


def www_authenticate(url: str) -> str | None:
    try:
        urllib.request.urlopen(url, timeout=30)
    except urllib.error.HTTPError as err:
        return err.headers.get("WWW-Authenticate")
    return None
