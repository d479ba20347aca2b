"""Op sets that are facts about ONNX operators, shared by the graph facts, the pre-passes and the rules."""

from __future__ import annotations

# ops whose value is not a function of their inputs: never folded
NONDETERMINISTIC = frozenset({"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike",
                              "Multinomial", "Bernoulli"})

# ops a compiler removes as no-ops at inference (the pre-pass eliminate_identity; the context rules look
# through them)
IDENTITY_OPS = frozenset({"Identity", "Dropout"})

# ops whose output is the shape of their input (folded by fold_shape_ops when it is static)
SHAPE_OPS = frozenset({"Shape", "Size"})

# ops whose shape inference types the values of their subgraph bodies
CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})

# ops the graph facts never evaluate while folding small constants: the nondeterministic ones, the
# control flow and sequence construction
NOT_FOLDED = NONDETERMINISTIC | {"If", "Loop", "Scan", "SequenceConstruct"}
