"""The web console at /: a single-page app (Preact + htm, uPlot charts) shipped as package data and
served from memory, gzipped, under a content-hashed /console/static/<version>/ path cached for a year.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
from dataclasses import dataclass
from importlib import resources

from aiohttp import web

STATIC_PREFIX = "/console/static/"
_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
}
_IMMUTABLE = "public, max-age=31536000, immutable"


@dataclass(frozen=True)
class Asset:
    """One static file: its bytes, their gzip, content type and entity tag."""

    body: bytes
    gzipped: bytes
    content_type: str
    etag: str


@dataclass(frozen=True)
class Assets:
    """Every static file by its path under static/, the index page, and the version in their URLs."""

    files: dict[str, Asset]
    index: Asset
    version: str


def _asset(body: bytes, name: str) -> Asset:
    ext = name[name.rfind(".") :] if "." in name else ""
    ctype = _TYPES.get(ext) or mimetypes.guess_type(name)[0] or "application/octet-stream"
    etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
    return Asset(body, gzip.compress(body, 9, mtime=0), ctype, etag)


def load_assets() -> Assets:
    """Read static/ from the installed package; index.html gets the version and static prefix."""
    root = resources.files("kafkalite.web.console") / "static"
    raw: dict[str, bytes] = {}

    def walk(node: resources.abc.Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif not child.name.startswith("."):
                raw[prefix + child.name] = child.read_bytes()

    walk(root, "")
    index_src = raw.pop("index.html")
    digest = hashlib.sha256()
    for name in sorted(raw):
        digest.update(name.encode() + b"\0" + raw[name])
    version = digest.hexdigest()[:12]
    base = f"{STATIC_PREFIX}{version}/"
    index = index_src.replace(b"{{STATIC}}", base.encode())
    return Assets({k: _asset(v, k) for k, v in raw.items()}, _asset(index, "index.html"), version)


def _respond(request: web.Request, asset: Asset, cache_control: str) -> web.Response:
    headers = {"Cache-Control": cache_control, "ETag": asset.etag, "Vary": "Accept-Encoding"}
    if request.headers.get("If-None-Match") == asset.etag:
        return web.Response(status=304, headers=headers)
    headers["Content-Type"] = asset.content_type
    if "gzip" in request.headers.get("Accept-Encoding", "") and len(asset.gzipped) < len(
        asset.body
    ):
        headers["Content-Encoding"] = "gzip"
        return web.Response(body=asset.gzipped, headers=headers)
    return web.Response(body=asset.body, headers=headers)


ASSETS_KEY: web.AppKey[Assets] = web.AppKey("console_assets", Assets)


async def index(request: web.Request) -> web.Response:
    """The single page (hash routes pick the view); revalidated on every load."""
    return _respond(request, request.app[ASSETS_KEY].index, "no-cache")


async def static(request: web.Request) -> web.Response:
    """/console/static/<version>/<path>: cached for a year; without the current version, no-cache."""
    assets = request.app[ASSETS_KEY]
    path = request.match_info["path"]
    cache = "no-cache"
    head, _, rest = path.partition("/")
    if head == assets.version:
        path, cache = rest, _IMMUTABLE
    asset = assets.files.get(path)
    if asset is None:
        raise web.HTTPNotFound(text=f"no console asset {path!r}")
    return _respond(request, asset, cache)


def setup(app: web.Application) -> None:
    """Add the console's routes: / and /console (the page) and its static files."""
    app[ASSETS_KEY] = load_assets()
    app.router.add_get("/", index)
    app.router.add_get("/console", index)
    app.router.add_get("/console/", index)
    app.router.add_get(STATIC_PREFIX + "{path:.+}", static)
