"""Work done in a process of its own (core/isolation.py): what it returns or raises comes back,
a deadline kills it and the next call gets a new process, a memory cap holds, and the process
ends with its parent. The work is the standard library's (a child imports it by name)."""

from __future__ import annotations

import operator
import os
import signal
import subprocess
import sys
import time

import pytest

from chiezo.core.isolation import Isolated, IsolatedFailure


def _ahead(seconds: float) -> float:
    return time.monotonic() + seconds


def test_a_call_returns_its_value_and_raises_its_error():
    isolated = Isolated(512 * 2**20)
    assert isolated.run(operator.add, 2, 3, deadline=_ahead(30)) == 5
    with pytest.raises(IsolatedFailure, match="ZeroDivisionError") as raised:
        isolated.run(operator.truediv, 1, 0, deadline=_ahead(30))
    assert raised.value.reason == "error"
    assert isolated.run(operator.mul, 6, 7, deadline=_ahead(30)) == 42  # the same child serves on


@pytest.mark.slow
def test_past_its_deadline_the_work_is_killed_and_the_next_call_is_answered():
    isolated = Isolated(512 * 2**20)
    isolated.run(len, "warm", deadline=_ahead(30))
    (first,) = list(isolated._idle.queue)
    started = time.monotonic()
    with pytest.raises(IsolatedFailure) as raised:
        isolated.run(time.sleep, 30, deadline=_ahead(0.5))
    assert raised.value.reason == "timeout" and time.monotonic() - started < 2
    assert first.process.wait(5) is not None  # killed, not left sleeping
    assert isolated.run(len, "again", deadline=_ahead(30)) == 5


@pytest.mark.slow
def test_work_that_needs_more_memory_than_its_cap_fails_as_such():
    isolated = Isolated(256 * 2**20)
    with pytest.raises(IsolatedFailure) as raised:
        isolated.run(bytearray, 512 * 2**20, deadline=_ahead(30))
    assert raised.value.reason == "memory"
    assert isolated.run(len, "fine", deadline=_ahead(30)) == 4


PARENT = """
import sys, time
from chiezo.core.isolation import Isolated
isolated = Isolated(256 * 2**20)
isolated.run(len, "x", deadline=time.monotonic() + 30)
print(list(isolated._idle.queue)[0].process.pid, flush=True)
isolated.run(time.sleep, 60, deadline=time.monotonic() + 120)
"""


@pytest.mark.slow
def test_the_child_ends_when_its_parent_is_killed_even_in_the_middle_of_work():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    time.sleep(0.5)  # the child is sleeping its 60 s for the parent
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(5)
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail("the child outlived its parent by 5 s")
