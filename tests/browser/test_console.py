"""The web console against a real broker in headless Chromium: create a topic through the form, find a
record produced through REST by its key, watch a confluent-kafka group's lag fall to 0, reset it.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import severe_console_errors, wait_for

from kafkalite.testing import Broker

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(120)]

TOPIC = "console-demo"
GROUP = "console-group"
RECORDS = 12


def rest(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    props = {
        "http.listeners": "http://127.0.0.1:0",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "6000",
    }
    with Broker(tmp_path / "data", config=props) as b:
        try:
            urllib.request.urlopen(b.http_url + "/v3/clusters", timeout=5).close()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                pytest.skip("the REST Proxy v3 routes (/v3) are not in this build yet")
            raise
        yield b


class GroupConsumer:
    """A confluent-kafka consumer in GROUP on a thread, committing each record it reads, slowly
    (`delay` s a record) so that the page sees its lag fall."""

    def __init__(self, bootstrap: str, delay: float = 0.4) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
            }
        )
        self.read = 0
        self.delay = delay
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.consumer.subscribe([TOPIC])
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            self._stop.wait(self.delay)
            self.read += 1
            self.consumer.commit(message=msg, asynchronous=False)
        self.consumer.close()

    def start(self) -> GroupConsumer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(20)


def test_console_end_to_end(broker: Broker, driver: Any, screenshot: Callable[[str], Path]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    url = broker.http_url
    cid = rest("GET", url + "/v3/clusters")["data"][0]["cluster_id"]
    v3 = f"{url}/v3/clusters/{cid}"

    driver.get(url + "/")
    wait_for(driver, "#brokers tbody td")
    assert wait_for(driver, "#under-replicated").text == "0"

    # create a topic through the form
    driver.get(url + "/#/topics")
    form = wait_for(driver, "#create-topic")
    form.find_element(By.NAME, "topic_name").send_keys(TOPIC)
    form.find_element(By.NAME, "configs").send_keys("retention.ms=3600000")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, "#topics a", TOPIC)
    assert TOPIC in broker.topics()
    screenshot("topics")

    # produce through REST, find the record by its key
    for i in range(RECORDS):
        rest(
            "POST",
            f"{v3}/topics/{TOPIC}/records",
            {
                "partition_id": 0,
                "key": {"type": "STRING", "data": f"needle-{i}" if i == 7 else f"k-{i}"},
                "value": {"type": "JSON", "data": {"n": i, "tags": ["a", "b"]}},
                "headers": [{"name": "trace", "value": base64.b64encode(b"t-%d" % i).decode()}],
            },
        )
    driver.get(url + f"/#/topics/{TOPIC}")
    wait_for(driver, "#partitions td", str(RECORDS))
    wait_for(driver, "#configs tr[data-config='retention.ms'] code", "3600000")
    screenshot("topic")

    driver.get(url + f"/#/messages/{TOPIC}")
    wait_for(driver, "#records tr.record[data-offset='11']")
    driver.find_element(By.ID, "search").send_keys("needle")
    wait_for(driver, "#record-count", f"1 of {RECORDS}")
    row = driver.find_element(By.CSS_SELECTOR, "#records tr.record")
    assert row.get_attribute("data-offset") == "7"
    assert "needle-7" in row.find_element(By.CSS_SELECTOR, "td.key").text
    value = row.find_element(By.CSS_SELECTOR, "td.value pre").text
    assert json.loads(value) == {"n": 7, "tags": ["a", "b"]}
    assert "\n" in value  # pretty-printed
    assert "trace: t-7" in row.find_element(By.CSS_SELECTOR, "td.headers").text
    screenshot("messages")

    # a consumer group reads and commits everything: its lag falls to 0
    member = GroupConsumer(broker.bootstrap_servers).start()
    try:
        driver.get(url + f"/#/groups/{GROUP}")
        lagging = WebDriverWait(driver, 30, poll_frequency=0.1).until(
            lambda d: [
                int(el.text)
                for el in d.find_elements(By.CSS_SELECTOR, "#lags td.lag")
                if el.text.isdigit() and int(el.text) > 0
            ],
            "no positive lag shown while the group consumes",
        )
        assert 0 < lagging[0] <= RECORDS
        wait_for(driver, "#member-count", "1", timeout=20)
        wait_for(driver, "#total-lag", "0", timeout=30)
        wait_for(driver, "#members td", TOPIC)
        screenshot("group-consuming")
    finally:
        member.stop()
    assert member.read == RECORDS

    # the group is empty now: reset to earliest, dry run first, then execute
    wait_for(driver, "#member-count", "0", timeout=20)
    Select(driver.find_element(By.CSS_SELECTOR, "#reset-form select[name=topic]")).select_by_value(
        TOPIC
    )
    Select(driver.find_element(By.CSS_SELECTOR, "#reset-form select[name=to]")).select_by_value(
        "earliest"
    )
    driver.find_element(By.ID, "reset-preview").click()
    preview = wait_for(driver, "#reset-table", "Dry run")
    cells = [td.text for td in preview.find_elements(By.CSS_SELECTOR, "tbody td")]
    assert cells == [TOPIC, "0", str(RECORDS), "0"]
    assert wait_for(driver, "#total-lag").text == "0"  # a dry run changes nothing
    driver.find_element(By.ID, "reset-execute").click()
    wait_for(driver, "#reset-note", "Offsets reset for 1 partition")
    wait_for(driver, "#total-lag", str(RECORDS), timeout=10)
    wait_for(driver, "#lag-chart canvas")
    screenshot("group-reset")

    driver.get(url + "/#/overview")
    wait_for(driver, "#brokers tbody td")
    screenshot("overview")
    assert severe_console_errors(driver) == []
