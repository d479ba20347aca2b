"""The QNN tables list the merge_identical_nodes, eliminate_noop_arithmetic, eliminate_same_type_casts and
eliminate_noop_expand_slice pre-passes (revision-2 errata) and reproduce the recorded placement of the duplicates_extra,
duplicate_chains_extra, partial_shape_extra, noop_extra, noop_datadep_extra, same_type_cast_extra,
noop_layout_extra, noop_expand_merge_extra and reshape_target_fusion_extra probes
(pytest_npucheck/probe/models_common_subexpressions.py, models_data_dependent_shape.py, models_noop_arithmetic.py,
models_noop_layout.py, models_reshape_fusion.py)."""

from __future__ import annotations

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.probe.models_common_subexpressions import _chains, _pair
from pytest_npucheck.probe.models_data_dependent_shape import PARTIAL_SHAPE, _partial_shape
from pytest_npucheck.probe.models_noop_arithmetic import (NOOPS, NOOPS_DATADEP, SAME_TYPE_CASTS, _noop, _noop_datadep,
                                                          _same_type_cast)
from pytest_npucheck.probe.models_cpu_transposes import CPU_TRANSPOSES
from pytest_npucheck.probe.models_cumsum_rank import CUMSUMS, _cumsum
from pytest_npucheck.probe.models_datadep_contraction import CONTRACTIONS, _contraction, _contraction_unknown_width
from pytest_npucheck.probe.models_dead_nodes import DEAD, _dead
from pytest_npucheck.probe.models_gather_index import GATHER_UNIT_AXIS, _gather_unit_axis
from pytest_npucheck.probe.models_noop_layout import NOOP_LAYOUTS, _expand_merge, _noop_layout
from pytest_npucheck.probe.models_reshape_fusion import FORMS, _fusion
from pytest_npucheck.probe.models_cnn_shapes import CNN_SHAPES, _cnn
from pytest_npucheck.tables import Catalog

from .recorded import qnn_extra_record

CASES = [(f"q.{'Shape' if kind == 'shape' else 'Relu'}.ctx=duplicate.{kind}.f32.r3", _pair, (kind,))
         for kind in ("shape", "relu", "relu_output", "relu_cast")]
CASES += [(f"q.Shape.ctx=partial.{label}.f32.r3", _partial_shape, (read, which)) for label, read, which in PARTIAL_SHAPE]
CASES += [(f"q.{op}.ctx=noop.{label}.f32.r3", _noop, (op, value, shape, first)) for label, op, value, shape, first in NOOPS]
# x + 0 / x * 1 of NonZero-picked rows: removed when the constant is no wider than x (Longformer's x * [1])
CASES += [(f"q.{op}.ctx=noop_datadep.{label}.f32.r2", _noop_datadep, (op, value, shape))
          for label, op, value, shape in NOOPS_DATADEP]
CASES += [(f"q.{op}.ctx=duplicate_chain.{kind}.f32.r3", _chains, (kind,)) for kind, op in (("nonzero", "NonZero"),
                                                                                            ("relu", "Relu"))]
CASES += [(f"q.Cast.ctx=same_type.{label}.{'datadep' if dyn else 'static'}.f32.r3", _same_type_cast, (where, dyn))
          for label, where in SAME_TYPE_CASTS for dyn in (False, True)]
# Expand / Slice no-ops (and Reshape, which stays) on static and NonZero-picked rows; a NonZero of an expanded mask
CASES += [(f"q.{op}.ctx=noop_layout.{label}.{'datadep' if dyn else 'static'}.f32.r3", _noop_layout, (build, dyn))
          for label, op, build in NOOP_LAYOUTS for dyn in (False, True)]
CASES += [(f"q.NonZero.ctx=duplicate_chain.expand_noop.{how}.f32.r2", _expand_merge, (how,)) for how in ("const", "shape_of")]
# a node read only by a folded Shape (LED's int64 Pad), rank-5 CumSum (Kimi-Linear), the Reshape after a
# contraction over a data-dependent dim, a CPU island's Transpose replaced by a CPU helper (FastSpeech2)
CASES += [(f"q.{op}.ctx=dead.{label}.r2", _dead, (op, dtype, also)) for label, op, dtype, also in DEAD]
CASES += [(f"q.CumSum.ctx=rank.{label}.f32.r{len(shape)}", _cumsum, (shape, axis)) for label, shape, axis in CUMSUMS]
CASES += [(f"q.Reshape.ctx=datadep_contraction.{kind}.f32.r2", _contraction, (kind,)) for kind in CONTRACTIONS]
# the same contraction of rows widened to a width only the checker evaluates (a NonZero of a constant): the Reshape
# after it has no static input for onnxruntime (Longformer/LED Reshape_68)
CASES += [(f"q.Reshape.ctx=datadep_contraction.{kind}_unknown_width.f32.r2", _contraction_unknown_width, (kind,))
          for kind in ("einsum", "matmul")]
CASES += [(f"q.Transpose.ctx=cpu_island.{label}.{'datadep' if dyn else 'static'}.f32.r3", build, (dyn,))
          for label, build, _ in CPU_TRANSPOSES for dyn in (False, True)]
# a Reshape target Concat with one computed element becomes a constant (VITS), with two, beside a -1 or read twice
# it stays a run-time target and the Reshape and the Sigmoid after it run on the CPU
CASES += [(f"q.Reshape.ctx=fuse_target.{label}.f32.r3", _fusion, (label,)) for label in FORMS]
# odd channel counts, grouped/depthwise/3-D convolutions, grouped ConvTranspose with output_padding, ceil_mode pools
CASES += [(f"q.{op}.ctx=cnn_shapes.{label}.f32.r{len(shape)}", _cnn, (label,))
          for label, (op, shape, _w, _a) in CNN_SHAPES.items()]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("pid,build,args", CASES, ids=[c[0] for c in CASES])
def test_table_reproduces_every_node_of_the_probe(catalog, arch, pid, build, args):
    rec = qnn_extra_record(arch, pid)
    table = catalog.table(f"qnn@2.51.0/htp-v{arch}")
    assert {"merge_identical_nodes", "eliminate_noop_arithmetic", "eliminate_same_type_casts",
            "eliminate_noop_expand_slice", "eliminate_unused_nodes", "fuse_reshape_target"} <= set(table.prepasses)
    got = {n.name: n.verdict for n in match(facts_from_model(build(*args).build()), table).nodes}
    assert rec["status"] == "ok"
    # a node in no partition ('removed': a Transpose pair the layout transformation cancels) runs nowhere: NPU side
    want = {k: "npu" if v == "removed" else v for k, v in rec["placement"].items()}
    assert {k: got[k] for k in rec["placement"]} == want


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("label,shape,axis,idx,transpose", GATHER_UNIT_AXIS, ids=[c[0] for c in GATHER_UNIT_AXIS])
def test_a_rank6_gather_result_runs_on_the_npu_only_when_transposes_read_it(catalog, arch, label, shape, axis, idx,
                                                                           transpose):
    # the Gather (and the Transpose) as placed; the Reshape after a CPU rank-6 Gather also runs on the CPU, which
    # the tables record as a known disagreement (a rank-6 tensor crossing into the CPU partition)
    pid = f"q.Gather.ctx=rank6.{label}.f32.r5"
    rec = qnn_extra_record(arch, pid)
    got = {n.name: n.verdict for n in match(facts_from_model(_gather_unit_axis(shape, axis, idx, transpose).build()),
                                            catalog.table(f"qnn@2.51.0/htp-v{arch}")).nodes}
    assert {k: got[k] for k in rec["focus"]} == {k: rec["placement"][k] for k in rec["focus"]}
    assert got["focus_gather"] == ("npu" if transpose else "cpu")
