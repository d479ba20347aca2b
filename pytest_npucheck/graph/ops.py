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

# ops whose output is a sequence, not a tensor: a compiler's constant folding makes tensors (onnxruntime folds
# only a node whose every output is a tensor: a SequenceEmpty stays, q.shape.ctx=opaque_source.*)
SEQUENCE_OUTPUT = frozenset({"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase",
                             "SplitToSequence"})

# input positions whose values (not only their shapes) decide an op's output shape
SHAPE_FROM_VALUES: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Resize": (1, 2, 3),
    "Upsample": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2), "OneHot": (1,), "TopK": (1,), "Squeeze": (1,),
    "Unsqueeze": (1,), "Split": (1,), "CenterCropPad": (1,), "MaxUnpool": (2,), "DFT": (1,), "STFT": (2,),
    **{f"Reduce{r}": (1,) for r in ("Max", "Min", "Mean", "Sum", "Prod", "L1", "L2", "LogSum", "LogSumExp",
                                    "SumSquare")},
}


# ops whose output shape depends on the values of their data (or on which branch runs)
SHAPE_FROM_DATA = frozenset({"NonZero", "Unique", "NonMaxSuppression", "Compress", "StringSplit", "If", "Loop",
                             "Scan", "SequenceAt", "SplitToSequence", "ConcatFromSequence"})
