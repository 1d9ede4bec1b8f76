"""`kafkalite cluster up`'s ports: the documented fixed range when every port is free, else free ports for
all brokers with a line saying which were in use; 0 asks for free ports."""

from __future__ import annotations

import itertools
import socket

from kafkalite.cli.cluster import FIRST_BROKER_PORT, choose_ports, port_is_free


def test_fixed_range_when_free_else_all_free_ports_with_a_note() -> None:
    spare = itertools.count(40000)
    ports, note = choose_ports(9093, 3, lambda p: True, lambda: next(spare))
    assert (ports, note) == ([9093, 9094, 9095], None)
    ports, note = choose_ports(9093, 3, lambda p: p != 9094, lambda: next(spare))
    assert ports == [40000, 40001, 40002]
    assert (
        note
        == "port(s) 9094 in use: the brokers listen on free ports 40000, 40001, 40002 instead of 9093-9095"
    )
    assert choose_ports(0, 2, lambda p: True, lambda: next(spare)) == ([40003, 40004], None)
    assert FIRST_BROKER_PORT == 9093  # the README's cluster commands name 9093..9095


def test_port_is_free_sees_a_bound_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert not port_is_free(s.getsockname()[1])
