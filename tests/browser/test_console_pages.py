"""Every console page renders against a canned REST v3 stand-in (tests/browser/fake_rest.py): forms post
what the REST API expects, JSON values are pretty-printed, headers decoded, the lag chart drawn.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import severe_console_errors, wait_for
from fake_rest import FakeRest, Served

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def fake() -> Iterator[tuple[FakeRest, str]]:
    state = FakeRest()
    with Served(state.app()) as served:
        yield state, served.url


def test_pages_against_the_fake(
    driver: Any, screenshot: Callable[[str], Path], fake: tuple[FakeRest, str]
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    state, url = fake
    driver.get(url + "/")
    wait_for(driver, "#brokers td", "127.0.0.1")
    assert wait_for(driver, "#under-replicated").text == "0"
    screenshot("overview")

    driver.get(url + "/#/topics")
    form = wait_for(driver, "#create-topic")
    form.find_element(By.NAME, "topic_name").send_keys("payments")
    form.find_element(By.NAME, "partitions_count").clear()
    form.find_element(By.NAME, "partitions_count").send_keys("3")
    form.find_element(By.NAME, "configs").send_keys("retention.ms=1000\ncleanup.policy=compact")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, "#topics a", "payments")
    assert state.topics["payments"] == {
        "partitions": 3,
        "configs": {"retention.ms": "1000", "cleanup.policy": "compact"},
    }
    screenshot("topics")

    driver.get(url + "/#/topics/payments")
    row = wait_for(driver, "#configs tr[data-config='retention.ms']")
    row.find_element(By.XPATH, ".//button[text()='Edit']").click()
    box = row.find_element(By.NAME, "value")
    box.clear()
    box.send_keys("5000")
    row.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, "#configs tr[data-config='retention.ms'] code", "5000")
    assert state.topics["payments"]["configs"]["retention.ms"] == "5000"
    wait_for(driver, "#partitions tbody tr")

    state.topics["orders"]["configs"]["remote.storage.enable"] = "true"
    driver.get(url + "/#/topics/orders")
    # tiered storage: local and remote size per partition, and both totals
    wait_for(driver, "#partitions thead", "Remote size")
    wait_for(driver, "#partitions tbody tr", "1.0 MiB")
    produce = wait_for(driver, "#produce")
    wait_for(driver, "#produce select[name=partition] option[value='1']")
    Select(produce.find_element(By.NAME, "partition")).select_by_value("1")
    produce.find_element(By.NAME, "key").send_keys("k1")
    produce.find_element(By.NAME, "value").send_keys('{"a": [1, 2]}')
    produce.find_element(By.NAME, "headers").send_keys("trace=é1")
    produce.find_element(By.NAME, "json").click()
    produce.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, "#produce .msg", "Produced to partition 1 at offset 1")
    screenshot("topic")
    rec = state.records[("orders", 1)][1]
    assert rec["key"] == {"type": "STRING", "data": "k1"}
    assert rec["value"] == {"type": "JSON", "data": {"a": [1, 2]}}
    assert rec["headers"] == [{"name": "trace", "value": base64.b64encode("é1".encode()).decode()}]

    driver.get(url + "/#/messages/orders")
    wait_for(driver, "#records tr.record[data-offset='9']")
    driver.find_element(By.ID, "search").send_keys("order-3")
    rec = wait_for(driver, "#record-count", "1 of 12")
    assert rec
    value = driver.find_element(By.CSS_SELECTOR, "#records tr.record td.value pre").text
    assert value == '{\n  "id": 3,\n  "total": 7.5\n}'
    assert "source: web" in driver.find_element(By.CSS_SELECTOR, "#records td.headers").text
    screenshot("messages")
    Select(driver.find_element(By.NAME, "mode")).select_by_value("offset")
    offset = driver.find_element(By.NAME, "offset")
    offset.clear()
    offset.send_keys("8")
    Select(driver.find_element(By.NAME, "partition")).select_by_value("0")
    driver.find_element(By.ID, "search").send_keys(Keys.CONTROL, "a", Keys.BACKSPACE)
    driver.find_element(By.CSS_SELECTOR, "#browse button[type=submit]").click()
    wait_for(driver, "#record-count", "2 of 2")

    driver.get(url + "/#/groups")
    wait_for(driver, "#groups a", "billing").click()
    wait_for(driver, "#group-state", "STABLE")
    wait_for(driver, "#members td", "rdkafka")
    wait_for(driver, "#total-lag", "0")
    wait_for(driver, "#lag-chart canvas")
    driver.find_element(By.ID, "reset-preview").click()
    wait_for(driver, "#reset-table", "Dry run")
    driver.find_element(By.ID, "reset-execute").click()
    wait_for(driver, "#reset-note", "Offsets reset for 1 partition")
    screenshot("group")
    assert severe_console_errors(driver) == []
