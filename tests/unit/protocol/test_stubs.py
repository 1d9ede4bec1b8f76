"""The checked-in message stubs (protocol/messages/*.pyi) match what protocol/stubgen.py generates
from the declarations, so the types mypy sees cannot drift from the wire."""

from __future__ import annotations

from kafkalite.protocol import stubgen
from kafkalite.protocol.messages import produce


def test_every_stub_is_current() -> None:
    stale = [
        path.name
        for path, text in stubgen.generate().items()
        if not path.exists() or path.read_text() != text
    ]
    assert stale == [], "run `python -m kafkalite.protocol.stubgen` and commit the stubs"


def test_nested_structs_are_attributes_of_their_parent() -> None:
    text = stubgen.stub_path(produce).read_text()
    assert "class ProduceRequest(Request[ProduceResponse]):" in text
    assert "    class TopicProduceData(Struct):" in text
    assert "        class PartitionProduceData(Struct):" in text
    assert "            records: Buffer | None" in text
    assert "    RESPONSE: ClassVar[type[ProduceResponse]]" in text
    assert "    transactional_id: str | None" in text
    rq = produce.ProduceRequest
    assert rq.TopicProduceData.PartitionProduceData.__name__ == "PartitionProduceData"


def test_check_mode_reports_nothing_when_current() -> None:
    assert stubgen.main(["--check"]) == 0
