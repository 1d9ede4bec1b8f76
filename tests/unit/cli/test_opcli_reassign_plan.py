"""The pure side of `kafkalite reassign`: Kafka's JSON files read and written, `generate`'s placement,
the throttle configs of `execute`, `verify`'s report and the progress rows.
"""

from __future__ import annotations

import json
import random

import pytest

from kafkalite.cli import reassign_plan as plan
from kafkalite.cli.reassign import kafka_style
from kafkalite.cli.wire import CliError

KAFKA_FILE = """{"version":1,
 "partitions":[{"topic":"foo","partition":1,"replicas":[2,3],"log_dirs":["any","any"]},
               {"topic":"foo","partition":0,"replicas":[3,1]},
               {"topic":"bar","partition":0,"replicas":[1]}]}"""


def test_a_kafka_reassignment_file_reads_unchanged_and_writes_back_in_kafkas_shape() -> None:
    target = plan.parse_reassignment(KAFKA_FILE)
    assert target == {("foo", 1): [2, 3], ("foo", 0): [3, 1], ("bar", 0): [1]}
    doc = json.loads(plan.assignment_json(target))
    assert doc == {
        "version": 1,
        "partitions": [
            {"topic": "bar", "partition": 0, "replicas": [1], "log_dirs": ["any"]},
            {"topic": "foo", "partition": 0, "replicas": [3, 1], "log_dirs": ["any", "any"]},
            {"topic": "foo", "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "any"]},
        ],
    }
    assert plan.parse_reassignment(plan.assignment_json(target)) == target  # round trip


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "not valid JSON"),
        ("[]", '"partitions"'),
        ('{"version":2,"partitions":[{"topic":"a","partition":0,"replicas":[1]}]}', "version 2"),
        ('{"partitions":[]}', "no partition"),
        ('{"partitions":[{"topic":"a","replicas":[1]}]}', "lacks partition"),
        ('{"partitions":[{"topic":"a","partition":"0","replicas":[1]}]}', "integer"),
        ('{"partitions":[{"topic":"a","partition":0,"replicas":[]}]}', "empty"),
        ('{"partitions":[{"topic":"a","partition":0,"replicas":[1,1]}]}', "duplicates"),
        ('{"partitions":[{"topic":"a","partition":0,"replicas":[1,true]}]}', "integer"),
        (
            '{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
            "one directory per replica",
        ),
        (
            '{"partitions":[{"topic":"a","partition":0,"replicas":[1],"log_dirs":["/d1"]}]}',
            "AlterReplicaLogDirs",
        ),
        (
            '{"partitions":[{"topic":"a","partition":0,"replicas":[1]},'
            '{"topic":"a","partition":0,"replicas":[2]}]}',
            "listed twice",
        ),
    ],
)
def test_a_bad_reassignment_file_is_one_clear_error(text: str, says: str) -> None:
    with pytest.raises(CliError, match=says):
        plan.parse_reassignment(text)


def test_topics_to_move_and_broker_lists() -> None:
    assert plan.parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"b"}],"version":1}') == [
        "a",
        "b",
    ]
    for bad, says in [
        ('{"topics":[]}', "no topic"),
        ('{"topics":[{"name":"a"}]}', '"topic" name'),
        ('{"topics":[{"topic":"a"},{"topic":"a"}]}', "twice"),
        ("nope", "not valid JSON"),
    ]:
        with pytest.raises(CliError, match=says):
            plan.parse_topics_to_move(bad)
    assert plan.parse_broker_list("1, 2,3") == [1, 2, 3]
    for bad in ("1,x", "", "1,1"):
        with pytest.raises(CliError):
            plan.parse_broker_list(bad)


def test_generate_places_each_topic_over_the_broker_list_as_creation_would() -> None:
    current = {("a", p): [3, 1 + p % 2] for p in range(6)}
    current[("a", 3)] = [3, 1, 2]  # the replication factor comes from the first partition
    proposed = plan.propose(current, {1: None, 2: None}, random.Random(7))
    assert sorted(proposed) == sorted(current)
    assert all(sorted(proposed[("a", p)]) == [1, 2] for p in range(6))
    leaders = [proposed[("a", p)][0] for p in range(6)]
    assert leaders.count(1) == leaders.count(2) == 3  # leadership spread round-robin
    with pytest.raises(CliError, match="cannot place topic b"):
        plan.propose({("b", 0): [3, 1, 2]}, {1: None, 2: None})
    racked = plan.propose(
        {("c", p): [1, 2] for p in range(4)}, {1: "r1", 2: "r1", 3: "r2", 4: "r2"}, random.Random(1)
    )
    racks = {1: "r1", 2: "r1", 3: "r2", 4: "r2"}
    assert all(len({racks[b] for b in r}) == 2 for r in racked.values())
    with pytest.raises(CliError, match="rack"):
        plan.propose({("c", 0): [1]}, {1: "r1", 2: None})


def test_throttle_configs_name_the_replicas_kafka_throttles() -> None:
    current = {("t", 0): [1, 2], ("t", 1): [2, 3], ("u", 0): [1, 2]}
    target = {("t", 0): [2, 4], ("t", 1): [3, 2], ("u", 0): [1, 2]}
    assert plan.moving(current, target) == [("t", 0)]  # order alone is no move
    assert plan.leader_throttles(current, target) == {"t": "0:1,0:2"}
    assert plan.follower_throttles(current, target) == {"t": "0:4"}
    assert plan.reassigning_brokers(current, target) == [1, 2, 4]


def test_verify_reports_each_partition_like_kafka() -> None:
    target = {("t", 0): [2, 3], ("t", 1): [1, 2], ("t", 2): [3, 1]}
    current = {("t", 0): [2, 3], ("t", 1): [1, 2, 3], ("t", 2): [1, 3]}
    lines, done = plan.status_lines(target, current, [("t", 1), ("x", 0)])
    assert lines == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is complete.",
        "Reassignment of partition t-1 is still in progress.",
        "There is no active reassignment of partition t-2, but replica set is 1,3 rather than 3,1.",
    ]
    assert not done
    assert plan.status_lines(target, current, [("x", 0)])[1]


def test_progress_rows_compare_each_adding_replica_with_its_leader() -> None:
    rows = plan.progress_rows(
        adding={("t", 0): [4, 5], ("t", 1): [4]},
        leaders={("t", 0): 1, ("t", 1): -1},
        isr={("t", 0): [1, 2, 5]},
        sizes={(1, ("t", 0)): 4096, (4, ("t", 0)): 1024, (5, ("t", 0)): 4096},
    )
    r4, r5, lost = rows
    assert (r4.replica, r4.copied, r4.size, r4.lag_bytes, r4.in_isr) == (4, 1024, 4096, 3072, False)
    assert r4.fraction == 0.25
    assert r5.in_isr and r5.fraction == 1.0 and r5.lag_bytes == 0
    assert lost.leader == -1 and lost.size is None and lost.lag_bytes is None and lost.fraction == 0
    assert plan.human_bytes(3072) == "3.0 KiB" and plan.human_bytes(None) == "?"
    assert plan.human_bytes(5 << 30) == "5.0 GiB" and plan.human_bytes(12) == "12 B"


def test_kafkas_flag_form_becomes_the_subcommand() -> None:
    argv = ["reassign", "--bootstrap-server", "b:1", "--verify", "--reassignment-json-file", "f"]
    assert kafka_style(argv) == [
        "reassign",
        "verify",
        "--bootstrap-server",
        "b:1",
        "--reassignment-json-file",
        "f",
    ]
    assert kafka_style(["reassign", "cancel", "--x"]) == ["reassign", "cancel", "--x"]
    assert kafka_style(["topics", "--execute"]) == ["topics", "--execute"]


def test_brokers_view_counts_leaders_replicas_and_under_replicated_and_shows_dead_brokers() -> None:
    from types import SimpleNamespace as NS

    from kafkalite.cli.brokers import cluster_view, ranges

    brokers = [
        NS(broker_id=1, host="h", port=1, rack="a"),
        NS(broker_id=2, host="h", port=2, rack="b"),
    ]
    topics = [
        NS(name="t", error_code=0, partitions=[
            NS(partition_index=0, leader_id=1, replica_nodes=[1, 2], isr_nodes=[1, 2]),
            NS(partition_index=1, leader_id=2, replica_nodes=[2, 3], isr_nodes=[2]),
            NS(partition_index=2, leader_id=1, replica_nodes=[1, 2], isr_nodes=[1]),
        ]),
        NS(name="gone", error_code=3, partitions=[]),
    ]  # fmt: skip
    views = cluster_view(brokers, 2, topics)
    assert sorted(views) == [1, 2, 3]
    assert views[1].summary() == {
        "id": 1, "host": "h", "port": 1, "rack": "a", "controller": False, "alive": True,
        "leaders": 2, "replicas": 2, "underReplicated": 1,
    }  # fmt: skip
    assert views[2].controller and views[2].out_of_isr == [("t", 2)]
    assert views[2].under_replicated == [("t", 1), ("t", 2)]
    dead = views[3]
    assert not dead.alive and dead.host is None and dead.replicas == [("t", 1)]
    assert dead.out_of_isr == [("t", 1)] and dead.led == []
    assert ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8" and ranges([4]) == "4" and ranges([]) == ""
