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

from .build import clear_caches, facts_from_model, load_graph
from .facts import (DEFAULT_DOMAIN, DTYPE_SIZES, DYNAMIC_DIM, SMALL_CONSTANT, GraphFacts, NodeFact, TensorInfo,
                    dtype_name, iter_main_nodes, tensor_bytes)
from .frozen import frozen_new
from .gc_pause import paused_gc
from .location import SourceLocation, format_location
from .ops import CONTROL_FLOW, IDENTITY_OPS, NONDETERMINISTIC, NOT_FOLDED, SEQUENCE_OUTPUT, SHAPE_OPS
from .protobuf import Kept, load_model_proto
from .schema import op_schema
from .view import GraphView

__all__ = [
    "CONTROL_FLOW", "DEFAULT_DOMAIN", "DTYPE_SIZES", "DYNAMIC_DIM", "GraphFacts", "GraphView", "IDENTITY_OPS", "Kept",
    "NONDETERMINISTIC", "NOT_FOLDED", "NodeFact", "SEQUENCE_OUTPUT", "SHAPE_OPS", "SMALL_CONSTANT", "SourceLocation",
    "TensorInfo",
    "clear_caches", "dtype_name", "facts_from_model", "format_location", "frozen_new", "iter_main_nodes",
    "load_graph", "load_model_proto", "op_schema", "paused_gc", "tensor_bytes",
]
