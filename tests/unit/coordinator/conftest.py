"""Fixtures for coordinator unit tests (helpers live in coordinator_helpers.py).

Everything runs on a fake clock; nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from coordinator_helpers import Harness


@pytest.fixture
def h() -> Harness:
    return Harness()


@pytest.fixture
def make_harness() -> Callable[..., Harness]:
    return Harness
