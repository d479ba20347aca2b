"""Frozen dataclasses built and cached without their generated ``__init__`` / ``__setattr__``.

The facts (and the results the matcher builds from them) are frozen dataclasses made by the
thousand; these two helpers are the one place that writes a frozen instance's ``__dict__`` (the
slotted ones, which have none, are made by ``facts.tensor_info`` and ``graph.build``'s drafts).
"""

from __future__ import annotations

from typing import Any


class cached:
    """``functools.cached_property`` without its per-instance lock (Python 3.11 takes one on every
    first read, which cost ~50 ms over the tensors of a 9,000-node graph); the facts are built and
    read in one thread."""

    def __init__(self, func: Any) -> None:
        self.func, self.name, self.__doc__ = func, func.__name__, func.__doc__

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.func(obj)  # frozen dataclasses: bypass __setattr__
        return value


def frozen_new(cls: Any, **fields: Any) -> Any:
    """``cls(**fields)`` for a frozen dataclass given every field, without its generated __init__,
    which sets each field through object.__setattr__ (a third of the cost of reading a node).
    The loops that build one object per node or tensor inline it (``object.__new__`` and an update
    of ``__dict__``): the call and its keyword dict cost a third of the building. A slotted class
    (``TensorInfo``, ``NodeFact``: no ``__dict__``, and slots besides its fields that its
    ``__post_init__`` sets) is made by its constructor; ``facts.tensor_info`` is their fast path."""
    if "__slots__" in cls.__dict__:
        return cls(**fields)
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj
