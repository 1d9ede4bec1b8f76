"""The console's page and assets: / links content-hashed static URLs cached for a year, gzipped when
asked, revalidated by ETag; everything ships as package data and stays small.
"""

from __future__ import annotations

import asyncio
import re
import tomllib
from collections.abc import Awaitable, Callable
from fnmatch import fnmatch
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kafkalite.web import console

ROOT = Path(__file__).resolve().parents[3]
STATIC = ROOT / "src/kafkalite/web/console/static"


def run(check: Callable[[TestClient[web.Request, web.Application]], Awaitable[None]]) -> None:
    async def main() -> None:
        app = web.Application()
        console.setup(app)
        async with TestClient(TestServer(app)) as client:
            await check(client)

    asyncio.run(main())


def test_index_links_versioned_assets_that_are_cached() -> None:
    async def check(client: TestClient[web.Request, web.Application]) -> None:
        resp = await client.get("/")
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/html")
        assert resp.headers["Cache-Control"] == "no-cache"
        page = await resp.text()
        assert "{{" not in page
        urls = set(re.findall(r'"(/console/static/[^"]+)"', page))
        assert any(u.endswith("/app.js") for u in urls)
        version = console.load_assets().version
        for url in urls:
            assert url.startswith(f"/console/static/{version}/"), url
            got = await client.get(url)
            assert got.status == 200, url
            assert got.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert (await client.get("/console")).status == 200

    run(check)


def test_gzip_etag_and_unversioned_paths() -> None:
    async def check(client: TestClient[web.Request, web.Application]) -> None:
        plain = await client.get(
            "/console/static/vendor/uPlot.iife.min.js", headers={"Accept-Encoding": "identity"}
        )
        assert plain.status == 200
        assert plain.headers["Cache-Control"] == "no-cache"
        assert "Content-Encoding" not in plain.headers
        assert plain.headers["Content-Type"].startswith("text/javascript")
        body = await plain.read()
        zipped = await client.get(
            "/console/static/vendor/uPlot.iife.min.js",
            headers={"Accept-Encoding": "gzip"},
            auto_decompress=False,
        )
        assert zipped.headers["Content-Encoding"] == "gzip"
        assert len(await zipped.read()) < len(body) // 2
        again = await client.get(
            "/console/static/app.js", headers={"If-None-Match": plain.headers["ETag"]}
        )
        assert again.status == 200  # a different file's tag
        etag = again.headers["ETag"]
        cached = await client.get("/console/static/app.js", headers={"If-None-Match": etag})
        assert cached.status == 304
        assert (await client.get("/console/static/nope.js")).status == 404
        assert (await client.get("/console/static/../__init__.py")).status == 404

    run(check)


def test_assets_are_small_licensed_and_shipped_as_package_data() -> None:
    files = [p for p in STATIC.rglob("*") if p.is_file()]
    shipped = [p for p in files if p.suffix in {".js", ".css", ".html"}]
    assert sum(p.stat().st_size for p in shipped) < 200 * 1024
    vendor = {p.name for p in (STATIC / "vendor").iterdir()}
    assert {"LICENSE.preact", "LICENSE.htm", "LICENSE.uplot", "VERSIONS"} <= vendor
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["kafkalite.web.console"]
    base = STATIC.parent
    for p in files:
        rel = p.relative_to(base).as_posix()
        assert any(fnmatch(rel, g) and rel.count("/") == g.count("/") for g in globs), rel
