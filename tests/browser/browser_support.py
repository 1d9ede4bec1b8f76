"""Helpers for the console's browser tests: wait for an element (optionally holding some text) and read
the page's severe console messages.
"""

from __future__ import annotations

from typing import Any


def wait_for(driver: Any, css: str, text: str | None = None, timeout: float = 10) -> Any:
    """The first element matching `css` (whose text contains `text`), waiting up to `timeout` s."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def found(d: Any) -> Any:
        for el in d.find_elements(By.CSS_SELECTOR, css):
            try:
                if text is None or text in el.text:
                    return el
            except Exception:  # re-rendered between find and read: look again
                continue
        return False

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(
        found, f"no {css!r}" + (f" holding {text!r}" if text else "")
    )


def severe_console_errors(driver: Any) -> list[str]:
    """The page's SEVERE console messages so far: script errors, not HTTP statuses the page shows."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e.get("level") == "SEVERE" and "Failed to load resource" not in e["message"]
    ]
