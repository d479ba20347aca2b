"""Whole-model rejections of RKNN found in the corpus (session 7): a recurrent layer written with an
explicit ``layout`` attribute, as the dynamo exporter writes every LSTM and GRU (``layout=0``, the
default). rknn-toolkit2 2.3.2 loads and builds such a node alone, but its graph optimizer rewrites
the node when its output goes on into a Squeeze, or through Transpose (0, 2, 1, 3) -> Reshape into
another recurrent layer, a MatMul or out of the model (a stacked LSTM), and the rewritten node fails the
ONNX checker: "Unrecognized attribute: layout for operator LSTM". Into a Gemm (CRNN's classifier) or
a Relu it builds. Each family is built
with :mod:`.builder` like every family and listed in FAMILIES."""

from __future__ import annotations

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand

#: what reads the recurrent layer's Y (seq, dirs, batch, hidden): name -> the nodes after it
TAILS = ("squeeze", "t_r_out", "t_r_rnn", "t_r_relu", "t_r_matmul", "t_out", "relu", "t_r_gemm")


def _rnn(gb: GraphBuilder, x: str, op: str, cin: int, hid: int, name: str, layout: bool) -> str:
    gates = {"LSTM": 4, "GRU": 3}[op]
    attrs = {"layout": 0} if layout else {}
    return gb.node(op, [x, gb.const(rand([1, gates * hid, cin])), gb.const(rand([1, gates * hid, hid])),
                        gb.const(rand([1, 2 * gates * hid]))], name=name, hidden_size=hid, **attrs)


def rnn_layout_tail_extra(c: Collector) -> None:
    """An LSTM or GRU with and without an explicit ``layout=0`` at opset 19, its output read by each
    of TAILS."""
    seq, cin, hid = 12, 16, 16
    for op in ("LSTM", "GRU"):
        for layout in (True, False):
            for tail in TAILS:
                gb = GraphBuilder(19)
                x = gb.input("x", "float32", [seq, 1, cin])
                y = _rnn(gb, x, op, cin, hid, "focus_rnn", layout)
                if tail == "squeeze":
                    y = gb.node("Squeeze", [y, gb.ints([1])], name="post_squeeze")
                elif tail == "relu":
                    y = gb.node("Relu", [y], name="post_relu")
                else:
                    y = gb.node("Transpose", [y], perm=[0, 2, 1, 3], name="post_t")
                    if tail == "t_r_gemm":  # CRNN's per-step classifier: (T, H) -> Gemm
                        y = gb.node("Reshape", [y, gb.ints([seq, hid])], name="post_r")
                        y = gb.node("Gemm", [y, gb.weight([8, hid]), gb.weight([8])], transB=1, name="post_gemm")
                    elif tail != "t_out":
                        y = gb.node("Reshape", [y, gb.ints([seq, 1, hid])], name="post_r")
                    if tail == "t_r_rnn":
                        y = _rnn(gb, y, op, hid, hid, "post_rnn", False)
                    elif tail == "t_r_relu":
                        y = gb.node("Relu", [y], name="post_relu")
                    elif tail == "t_r_matmul":
                        y = gb.node("MatMul", [y, gb.weight([hid, 8])], name="post_mm")
                gb.output(y)
                c.add("x.%s.ctx=layout_tail.tail=%s.layout=%s.f32.r3" % (op, tail, "0" if layout else "none"), op,
                      gb, kind="context", focus=["focus_rnn"])


def global_mean_extra(c: Collector) -> None:
    """A rank-4 ReduceMean over the spatial axes with keepdims=0 (``x.mean((2, 3))`` before a
    classifier: ShuffleNetV2, ConvNeXt). rknn-toolkit2 2.3.2 turns it into a global pooling that
    keeps rank 4, and the model is rejected as a whole once a node reads the result ("... Got: 4
    Expected: 2"); other axes, keepdims=1, or the mean as the model's output build. The other
    versions build all of them."""
    for axes, keep, tail in [((2, 3), 0, "relu"), ((-2, -1), 0, "gemm"), ((2, 3), 0, "matmul"),
                             ((2, 3), 0, "out"), ((2, 3), 1, "relu"), ((2,), 0, "relu"), ((3,), 0, "relu"),
                             ((1,), 0, "relu"), ((1, 2, 3), 0, "relu")]:
        gb = GraphBuilder(18)
        x = gb.input("x", "float32", [1, 16, 8, 8])
        y = gb.node("Conv", [x, gb.weight([16, 16, 3, 3])], pads=[1, 1, 1, 1], name="pre_conv")
        y = gb.node("ReduceMean", [y, gb.ints(list(axes))], keepdims=keep, name="focus_mean")
        if tail == "relu":
            y = gb.node("Relu", [y], name="post_relu")
        elif tail == "gemm":
            y = gb.node("Gemm", [y, gb.weight([10, 16]), gb.weight([10])], transB=1, name="post_gemm")
        elif tail == "matmul":
            y = gb.node("MatMul", [y, gb.weight([16, 10])], name="post_mm")
        gb.output(y)
        c.add("x.ReduceMean.ctx=global_mean.axes=%s.keepdims=%d.tail=%s.f32.r4"
              % ("_".join(str(a) for a in axes), keep, tail), "ReduceMean", gb, kind="context", focus=["focus_mean"])


#: (label, keyword arguments of _token_concat): DeiT's form first, then one change each
TOKEN_VARIANTS = (
    ("tokens=2", {}),
    ("tokens=3", {"tokens": 3}),
    ("tokens=2.const", {"expand": False}),
    ("tokens=2.relu", {"tail": "relu"}),
    ("tokens=1", {"tokens": 1}),
    ("tokens=2.order=back", {"order": "back"}),
    ("tokens=2.order=mid", {"order": "mid"}),
    ("tokens=2.no_transpose", {"transpose": "none"}),
    ("tokens=2.transpose_relu", {"transpose": "relu"}),
    ("tokens=2.computed", {"computed": True}),
)


def _token_concat(tokens: int = 2, expand: bool = True, tail: str = "add", order: str = "front",
                  transpose: str = "plain", computed: bool = False) -> GraphBuilder:
    c = 64
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 3, 64, 64])
    y = gb.node("Conv", [x, gb.weight([c, 3, 8, 8]), gb.weight([c])], kernel_shape=[8, 8], strides=[8, 8],
                name="patch_conv")
    y = gb.node("Reshape", [y, gb.ints([1, c, 64])], name="patch_flat")
    if transpose != "none":
        y = gb.node("Transpose", [y], perm=[0, 2, 1], name="patch_t")
    if transpose == "relu":
        y = gb.node("Relu", [y], name="patch_relu")
    toks = []
    for i in range(tokens):
        t = gb.weight([1, 1, c])
        if computed:  # a token computed from the patches, not a parameter
            t = gb.node("Mul", [gb.node("ReduceMean", [y], axes=[1], keepdims=1, name="tok%d_mean" % i), t],
                        name="tok%d_mul" % i)
        elif expand:  # the exporters' cls_token.expand(batch, -1, -1)
            t = gb.node("Expand", [t, gb.ints([1, 1, c])], name="tok%d_expand" % i)
        toks.append(t)
    parts = {"front": toks + [y], "back": [y] + toks, "mid": toks[:1] + [y] + toks[1:]}[order]
    y = gb.node("Concat", parts, axis=1, name="focus_cat")
    y = gb.node("Add", [y, gb.weight([1, 64 + tokens, c])], name="pos_add")
    if tail == "relu":
        y = gb.node("Relu", [y], name="post_relu")
    gb.output(y)
    return gb


def token_concat_extra(c: Collector) -> None:
    """DeiT's token sequence: the class and distillation tokens (parameters, expanded to the batch)
    concatenated in front of the patch embeddings (Conv -> Reshape -> Transpose). rknn-toolkit2 2.3.2
    fails build() with a KeyError naming the Transpose's result when two or more constant tokens come
    before it; one token (ViT), the patches first or between the tokens, no Transpose, or tokens computed
    in the model build. Focus: the Concat."""
    for label, kw in TOKEN_VARIANTS:
        c.add("x.Concat.ctx=tokens.%s.f32.r3" % label, "Concat", _token_concat(**kw), kind="context",
              focus=["focus_cat"])


FAMILIES = [rnn_layout_tail_extra, global_mean_extra, token_concat_extra]
