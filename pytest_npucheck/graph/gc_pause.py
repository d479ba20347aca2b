"""The cyclic garbage collector paused around the bursts of small allocations of the facts and the matcher."""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector around a burst of allocations.

    Building facts and matching allocate tens of thousands of small acyclic objects, and every
    collection those allocations trigger rescans all live objects, so the cost grew faster than
    the node count. Reference counting still frees everything; cycles are collected afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            # what the burst allocated goes to the oldest generation without a scan (freeze and
            # unfreeze are constant-time); otherwise the first collections after the pause scan every
            # one of those objects again (~13 ms after the facts of a 9,000-node model). Not done when
            # something else in the process froze objects: their frozen set must stay frozen.
            if not _heap_frozen():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


_FROZEN = False  # something in this process froze objects (export._freeze_heap, or the user's code)


def _heap_frozen() -> bool:
    """Whether objects are frozen (gc.freeze) in this process.

    ``gc.get_freeze_count()`` walks the whole frozen list: ~15 ms per million objects, and a
    process that exported holds ~420,000 frozen objects, so it is asked only until the answer is
    yes (then it is remembered: nothing here unfreezes another's objects). While nothing is frozen
    the list is empty and the question costs nothing."""
    global _FROZEN
    if not _FROZEN and gc.get_freeze_count():
        _FROZEN = True
    return _FROZEN
