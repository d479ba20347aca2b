"""Fixtures of an existing model test-suite: the marker-only form of the check reuses them."""

import pytest
import torch

from models import TinyEncoder


@pytest.fixture
def model():
    torch.manual_seed(0)
    return TinyEncoder().eval()


@pytest.fixture
def example_inputs():
    return torch.randint(0, 100, (1, 16))
