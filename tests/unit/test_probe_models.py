"""probe/models.py and probe/extra_families.py: selecting probes by id prefix builds only those."""

from __future__ import annotations

import onnx

from pytest_npucheck.probe import models
from pytest_npucheck.probe.models import build_probes
from pytest_npucheck.probe.extra_families import build_extra_probes


def _count_builds(monkeypatch) -> list[int]:
    built = [0]
    real = models.GraphBuilder.build

    def counting(self):
        built[0] += 1
        return real(self)

    monkeypatch.setattr(models.GraphBuilder, "build", counting)
    return built


def test_a_selection_builds_only_the_selected_models(monkeypatch):
    """build_probes(select) shape-infers only the models whose id starts with a selected prefix
    (it built all ~1,200 and filtered afterwards: 0.65 CPU-s per call, minutes per test file)."""
    built = _count_builds(monkeypatch)
    probes = build_probes(["Sin.f32.r4", "Pad.mode=reflect"])
    assert {p.id for p in probes} >= {"Sin.f32.r4", "Pad.mode=reflect.f32.r4"}
    assert all(p.id.startswith(("Sin.f32.r4", "Pad.mode=reflect")) for p in probes)
    assert built[0] == len(probes)
    built[0] = 0
    extra = build_extra_probes(["x.pattern.gelu_erf.half_first.f32.r3"])
    assert [p.id for p in extra] == ["x.pattern.gelu_erf.half_first.f32.r3"]
    assert built[0] == 1


def test_a_selection_gives_the_same_probes_as_filtering_the_full_build():
    select = ["Resize.", "LSTM.", "ctx."]
    full = [p for p in build_probes() if p.id.startswith(tuple(select))]
    picked = build_probes(select)
    assert [p.id for p in picked] == [p.id for p in full] and len(picked) > 10
    for a, b in zip(picked, full):
        assert a.model.SerializeToString() == b.model.SerializeToString(), a.id
        assert (a.op, a.focus, a.attributes, a.dtype, a.shapes, a.opset) == \
            (b.op, b.focus, b.attributes, b.dtype, b.shapes, b.opset), a.id
        onnx.checker.check_model(a.model)


def test_a_duplicate_id_is_refused_even_when_not_selected():
    import pytest

    c = models.Collector(select=["Nothing"])
    gb = models.GraphBuilder()
    gb.output(gb.node("Relu", [gb.input("x", "float32", [1, 4])]))
    c.add("Relu.f32.r2", "Relu", gb)
    assert c.probes == []
    with pytest.raises(ValueError, match="duplicate probe id Relu.f32.r2"):
        c.add("Relu.f32.r2", "Relu", gb)


def test_extra_probes_are_the_same_models_in_every_call():
    """The random constants restart per call: a selected extra probe equals the same probe of a
    full build done after other builds in the same process."""
    build_probes(["Relu."])
    full = {p.id: p for p in build_extra_probes()}
    picked = build_extra_probes(["x.Trilu", "x.LSTM", "x.pattern.gelu_erf"])
    assert len(picked) > 10
    for p in picked:
        assert p.model.SerializeToString() == full[p.id].model.SerializeToString(), p.id
