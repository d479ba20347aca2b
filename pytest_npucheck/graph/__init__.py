"""ONNX model -> immutable graph facts, one module per concern.

- ``facts``: the fact types (``GraphFacts``, ``NodeFact``, ``TensorInfo``), dtypes, ``DYNAMIC_DIM``;
- ``location``: where a node came from in the PyTorch source (``SourceLocation``), parsed from the
  exporters' metadata, and ``format_location``, the one way a location is written;
- ``protobuf``: reading an ONNX file, without its weights when the facts are all that is wanted;
- ``build``: facts from a model (``load_graph``, ``facts_from_model``): shape inference and its
  orchestration; ``propagate``: the node-by-node walk after it; ``fold``: the constant evaluator;
- ``schema``: ONNX's operator schemas and attribute defaults; ``ops``: op sets shared by the facts,
  the pre-passes and the rules;
- ``view``: the facts as a toolchain sees them after its pre-passes (``GraphView``);
- ``frozen`` and ``gc_pause``: building many frozen objects fast.

The names below are the public ones; ``from pytest_npucheck.graph import X`` imports them.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker and an editor see: the names, from their modules
    from .build import clear_caches, facts_from_model, load_graph
    from .facts import (DEFAULT_DOMAIN, DTYPE_SIZES, DYNAMIC_DIM, SMALL_CONSTANT, GraphFacts, NodeFact, TensorInfo,
                        dtype_name, iter_main_nodes, tensor_bytes, tensor_info)
    from .frozen import frozen_new
    from .gc_pause import paused_gc
    from .location import SourceLocation, format_location
    from .ops import CONTROL_FLOW, IDENTITY_OPS, NONDETERMINISTIC, NOT_FOLDED, SEQUENCE_OUTPUT, SHAPE_OPS
    from .protobuf import Kept, load_model_proto
    from .schema import op_schema
    from .view import GraphView

# Each public name is imported from its module on first use (PEP 562), not when the package is: a
# process that needs one light module (the report's ``location`` formatting, which the pytest
# controller imports) does not pay for the graph builder, the constant folder and the propagation
# (~25-60 ms), and ``from pytest_npucheck.graph import X`` imports X's module only.
_SOURCES = {
    "clear_caches": "build", "facts_from_model": "build", "load_graph": "build",
    "DEFAULT_DOMAIN": "facts", "DTYPE_SIZES": "facts", "DYNAMIC_DIM": "facts", "SMALL_CONSTANT": "facts",
    "GraphFacts": "facts", "NodeFact": "facts", "TensorInfo": "facts", "dtype_name": "facts",
    "iter_main_nodes": "facts", "tensor_bytes": "facts", "tensor_info": "facts",
    "frozen_new": "frozen", "paused_gc": "gc_pause", "SourceLocation": "location", "format_location": "location",
    "CONTROL_FLOW": "ops", "IDENTITY_OPS": "ops", "NONDETERMINISTIC": "ops", "NOT_FOLDED": "ops",
    "SEQUENCE_OUTPUT": "ops", "SHAPE_OPS": "ops",
    "Kept": "protobuf", "load_model_proto": "protobuf", "op_schema": "schema", "GraphView": "view",
}


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SOURCES))


__all__ = [
    "CONTROL_FLOW", "DEFAULT_DOMAIN", "DTYPE_SIZES", "DYNAMIC_DIM", "GraphFacts", "GraphView", "IDENTITY_OPS", "Kept",
    "NONDETERMINISTIC", "NOT_FOLDED", "NodeFact", "SEQUENCE_OUTPUT", "SHAPE_OPS", "SMALL_CONSTANT", "SourceLocation",
    "TensorInfo",
    "clear_caches", "dtype_name", "facts_from_model", "format_location", "frozen_new", "iter_main_nodes",
    "load_graph", "load_model_proto", "op_schema", "paused_gc", "tensor_bytes", "tensor_info",
]
