"""Browser fixtures: headless Debian Chromium through chromedriver (selenium), and a directory for page
screenshots ($KAFKALITE_SCREENSHOTS, else pytest's tmp path; copied to /tmp/kafkalite-console-screenshots).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SHARED_SHOTS = Path("/tmp/kafkalite-console-screenshots")


@pytest.fixture
def driver() -> Iterator[Any]:
    """A headless Chromium window (1400x1000) that records the page's console messages."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/test installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        opts.add_argument(arg)
    opts.add_argument("--window-size=1400,1000")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.implicitly_wait(0)
    try:
        yield drv
    finally:
        drv.quit()


@pytest.fixture
def screenshot(
    driver: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[str], Path]]:
    """shot(name) saves a full-window PNG of the current page; the paths are printed at the end."""
    env = os.environ.get("KAFKALITE_SCREENSHOTS")
    root = Path(env) if env else tmp_path / "screenshots"
    test = request.node.name.replace("[", "-").replace("]", "")
    out = root / test
    out.mkdir(parents=True, exist_ok=True)
    taken: list[Path] = []

    def shot(name: str) -> Path:
        path = out / f"{len(taken) + 1:02d}-{name}.png"
        driver.save_screenshot(str(path))
        taken.append(path)
        return path

    yield shot
    if taken:
        shared = SHARED_SHOTS / test
        shared.mkdir(parents=True, exist_ok=True)
        for p in taken:
            shutil.copy(p, shared / p.name)
        print(f"\nconsole screenshots: {out} (copied to {shared})")
