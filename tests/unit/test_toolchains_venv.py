"""toolchains/venv.py: the plumbing the toolchain adapters share."""

from __future__ import annotations

import os

from pytest_npucheck.toolchains.venv import process_cpu_seconds

NO_SUCH_PID = 2**22 + 4321  # above Linux's largest pid_max: never a live process


def test_cpu_seconds_of_a_live_process_are_what_the_kernel_counted_and_none_for_a_gone_one():
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        return  # not Linux: nothing to read, and the adapters record None
    sum(i * i for i in range(300_000))  # some work of our own
    before = os.times()
    mine = process_cpu_seconds(os.getpid())
    after = os.times()
    assert mine is not None
    tick = 1 / os.sysconf("SC_CLK_TCK")
    # the kernel's own count of this process (and its waited-for children), to a clock tick
    low = before.user + before.system + before.children_user + before.children_system - tick
    high = after.user + after.system + after.children_user + after.children_system + tick
    assert low <= mine <= high
    assert process_cpu_seconds(NO_SUCH_PID) is None
