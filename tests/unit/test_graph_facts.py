"""graph/facts.py: ``tensor_info`` makes the TensorInfo the constructor makes, without its frozen ``__init__``."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_npucheck.graph import TensorInfo, frozen_new, tensor_info


@pytest.mark.parametrize("shape, static", [((2, 3), True), ((), True), (("n", 3), False), ((None, 3), False),
                                           (None, False)])
def test_tensor_info_is_the_constructed_tensor_info(shape, static):
    made = tensor_info("t", "float32", shape, True, (1.0,))
    built = TensorInfo("t", "float32", shape, True, (1.0,))
    assert type(made) is TensorInfo and made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert made.static is built.static is static
    assert tensor_info("t", "float32", shape) == TensorInfo("t", "float32", shape)  # const and value default
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.name = "u"  # type: ignore[misc]


def test_tensor_info_takes_static_from_the_caller_when_given():
    # the callers pass the static of an info of the same shape (or of the decoded type)
    assert tensor_info("t", None, (2, 3), static=True).static is True
    assert tensor_info("t", None, ("n",), static=False).static is False


def test_frozen_new_makes_a_slotted_class_through_its_constructor():
    made = frozen_new(TensorInfo, name="t", dtype="int64", shape=(4,), const=False, value=None)
    assert type(made) is TensorInfo and made == TensorInfo("t", "int64", (4,)) and made.static
    assert not hasattr(made, "__dict__")
