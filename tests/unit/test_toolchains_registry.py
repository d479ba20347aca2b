"""toolchains/registry.py: a toolchain added from outside the package, through the entry-point group.

The plug-in is tests/data/toolchain_plugin: the package ``acme_npu`` and its ``acme_npu-1.0.dist-info``
(whose entry_points.txt registers ``acme`` in ``pytest_npucheck.toolchains``), found by
importlib.metadata once that directory is on sys.path. Nothing in pytest_npucheck names it, yet
`npucheck targets`, `npucheck check` and the oracle (oracles/oracle.py) use it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from onnx import helper

from conftest import const, make_model

from pytest_npucheck.cli import main
from pytest_npucheck.errors import UsageError
from pytest_npucheck.toolchains import registry

PLUGIN = Path(__file__).resolve().parents[1] / "data" / "toolchain_plugin"


@pytest.fixture
def acme(monkeypatch):
    """The plug-in installed for one test: its directory on sys.path, the registry read afresh."""
    monkeypatch.syspath_prepend(str(PLUGIN))
    registry.reset()
    yield registry.get("acme")
    monkeypatch.undo()
    registry.reset()


@pytest.fixture
def pad_relu(save):
    m = make_model([helper.make_node("Pad", ["x", "pads"], ["p"], name="pad", mode="reflect"),
                    helper.make_node("Relu", ["p"], ["y"], name="relu")],
                   [("x", (1, 3, 8, 8))], ["y"], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1], "int64")])
    return save(m, "pad_relu.onnx")


def test_built_in_toolchains_and_an_unknown_one():
    registry.reset()
    assert {"rknn", "qnn", "snpe", "cann"} <= set(registry.names())
    assert registry.get("rknn").package == "rknn-toolkit2" and registry.get("rknn").has_oracle
    assert not registry.get("snpe").has_oracle and registry.get("cann").probes is None
    with pytest.raises(UsageError, match=r"unknown toolchain 'nope'; registered toolchains: cann, qnn, rknn, snpe"):
        registry.get("nope")


def test_the_table_directories_are_read_without_importing_the_built_in_toolchains(monkeypatch):
    """Every Catalog.discover asks for the plug-ins' table directories: the built-in toolchains ship
    none (their tables are the bundled ones), so their modules are not imported for it."""
    loaded = []
    real = registry.load_hook
    monkeypatch.setattr(registry, "load_hook", lambda ref, what: loaded.append(ref) or real(ref, what))
    registry.reset()
    try:
        assert registry.table_dirs() == [] and loaded == []
        assert all(tc.tables is None and tc.source == "built in" for name, tc in registry.registered().items()
                   if name in registry.BUILT_IN)
        assert loaded == list(registry.BUILT_IN.values())
    finally:
        registry.reset()


def test_an_entry_point_registers_a_toolchain(acme):
    assert "acme" in registry.names()
    assert acme.source == "entry point 'acme' (acme-npu)"
    assert acme.engine == "ACME emulator" and acme.has_oracle and acme.probes is None
    assert acme.unavailable_reason() is None  # its oracle runs in this process
    assert registry.default_precision("acme") == "int8" and registry.default_precision("nope") == "fp16"
    with pytest.raises(UsageError, match="toolchain 'acme' has no probes hook"):
        acme.hook("probes")


def test_targets_and_check_use_the_plugin_table(acme, capsys, pad_relu):
    assert main(["targets", "--format", "json"]) == 0
    rows = {r["target"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["acme@1.0/npu1"]["title"] == "ACME NPU (a toolchain plug-in of the tests)"
    assert main(["check", str(pad_relu), "--target", "acme"]) == 1
    out = capsys.readouterr().out
    assert "acme@1.0/npu1" in out and "Pad pad: mode='reflect' not in {'constant'}" in out


def test_the_oracle_runs_the_plugin_toolchain(acme, pad_relu):
    import numpy as np

    from pytest_npucheck.check import check_graph, graph_facts
    from pytest_npucheck.oracles.oracle import run_target, unavailable_reason
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("acme")
    [result] = check_graph(graph_facts(pad_relu), [table])
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    reference = {"y": np.maximum(np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], mode="reflect"), 0)}
    o = run_target(pad_relu, result, table, {"x": x}, reference, precision="fp16")
    assert (o.status, o.package, o.package_version, o.precision) == ("ran", "acme-npu-sdk", "1.0", "fp16")
    assert o.build_status == "ok" and o.agreement.nodes == 2 and o.disagreements == 0  # Pad on the CPU, as the table says
    assert o.numerics["candidate"] == "ACME emulator fp16" and o.numerics["passed"] is True
    assert o.real_reasons == {"pad": ["the npu1 NPU has no unit for it"]}
    assert unavailable_reason("acme") is None


def test_without_the_plugin_acme_is_unknown(pad_relu):
    from pytest_npucheck.oracles.oracle import unavailable_reason

    registry.reset()
    assert "acme" not in registry.names()
    assert unavailable_reason("acme") == "no oracle for toolchain 'acme' (oracles exist for qnn, rknn)"


def test_a_broken_or_conflicting_entry_point_is_named(tmp_path, monkeypatch):
    info = tmp_path / "bad_npu-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-npu\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[pytest_npucheck.toolchains]\nbad = no_such_module:TOOLCHAIN\n",
                                           encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reset()
    try:
        with pytest.raises(UsageError, match=r"entry point 'bad' \(bad-npu\) of group pytest_npucheck.toolchains: "
                                             r"cannot load 'no_such_module:TOOLCHAIN'"):
            registry.names()
        monkeypatch.syspath_prepend(str(PLUGIN))
        (info / "entry_points.txt").write_text("[pytest_npucheck.toolchains]\nbad = acme_npu.oracle:CPU_OPS\n",
                                               encoding="utf-8")
        registry.reset()
        with pytest.raises(UsageError, match=r"'acme_npu.oracle:CPU_OPS' is a set, not a "
                                             r"pytest_npucheck.toolchains.registry.Toolchain"):
            registry.names()
        (info / "entry_points.txt").write_text("[pytest_npucheck.toolchains]\nrknn = acme_npu:TOOLCHAIN\n",
                                               encoding="utf-8")
        registry.reset()
        with pytest.raises(UsageError, match="registers toolchain 'rknn', which is already registered"):
            registry.names()
    finally:
        monkeypatch.undo()
        registry.reset()
