"""The console's Schemas pages against a real broker in headless Chromium: subjects listed from the
registry, a subject's versions and schema text, its compatibility level changed, a schema tested.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import severe_console_errors, wait_for

from kafkalite.testing import Broker

pytest.importorskip("fastavro")
pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(120)]

V1 = {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "ms", "type": "int", "default": 0}]}
BAD = {**V1, "fields": [*V1["fields"], {"name": "user", "type": "long"}]}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(tmp_path / "data", config={"http.listeners": "http://127.0.0.1:0"}) as b:
        yield b


def test_schemas_pages(driver: Any, screenshot: Callable[[str], Path], broker: Broker) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    client = SchemaRegistryClient({"url": broker.http_url})
    client.register_schema("clicks-value", Schema(json.dumps(V1), "AVRO"))
    second = client.register_schema("clicks-value", Schema(json.dumps(V2), "AVRO"))
    driver.get(broker.http_url + "/#/schemas")
    row = wait_for(driver, "#subjects tr[data-subject='clicks-value']")
    assert "2" in row.text and str(second) in row.text
    assert wait_for(driver, "#global-compat").text == "BACKWARD"
    screenshot("schemas")
    row.find_element(By.CSS_SELECTOR, "a").click()
    wait_for(driver, "#schema-text", '"ms"')
    assert wait_for(driver, "#schema-id").text == str(second)
    Select(wait_for(driver, "#compat-level")).select_by_value("FULL")
    WebDriverWait(driver, 10, poll_frequency=0.1).until(
        lambda _d: client.get_compatibility("clicks-value") == "FULL", "the level was not set"
    )
    form = wait_for(driver, "#compat-test")
    form.find_element(By.NAME, "schema").send_keys(json.dumps(BAD))
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    result = wait_for(driver, "#compat-result", "Incompatible")
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in result.text
    screenshot("schema-subject")
    assert severe_console_errors(driver) == []
