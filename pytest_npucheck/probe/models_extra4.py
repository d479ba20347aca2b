"""Whole-model rejections of RKNN found in the corpus (session 7): a recurrent layer written with an
explicit ``layout`` attribute, as the dynamo exporter writes every LSTM and GRU (``layout=0``, the
default). rknn-toolkit2 2.3.2 loads and builds such a node alone, but its graph optimizer rewrites
the node when its output goes on into a Squeeze, or through Transpose (0, 2, 1, 3) -> Reshape into
another recurrent layer, a MatMul or out of the model (a stacked LSTM), and the rewritten node fails the
ONNX checker: "Unrecognized attribute: layout for operator LSTM". Into a Gemm (CRNN's classifier) or
a Relu it builds. Each family is built
like those of models_extra.py and listed in FAMILIES."""

from __future__ import annotations

from pytest_npucheck.probe.models import GraphBuilder, _Collector, _rand

#: what reads the recurrent layer's Y (seq, dirs, batch, hidden): name -> the nodes after it
TAILS = ("squeeze", "t_r_out", "t_r_rnn", "t_r_relu", "t_r_matmul", "t_out", "relu", "t_r_gemm")


def _rnn(gb: GraphBuilder, x: str, op: str, cin: int, hid: int, name: str, layout: bool) -> str:
    gates = {"LSTM": 4, "GRU": 3}[op]
    attrs = {"layout": 0} if layout else {}
    return gb.node(op, [x, gb.const(_rand([1, gates * hid, cin])), gb.const(_rand([1, gates * hid, hid])),
                        gb.const(_rand([1, 2 * gates * hid]))], name=name, hidden_size=hid, **attrs)


def rnn_layout_tail_extra(c: _Collector) -> None:
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


def global_mean_extra(c: _Collector) -> None:
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


FAMILIES = [rnn_layout_tail_extra, global_mean_extra]
