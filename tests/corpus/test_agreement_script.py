"""scripts/rknn_agreement.py --real-from: the compiler's placements rebuilt from a committed agreement."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("rknn_agreement", REPO / "scripts" / "rknn_agreement.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from pytest_npucheck.export import ExportOptions, export_model

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 6 * 6, 4), torch.nn.LogSoftmax(-1)).eval()
    res = export_model(model, (torch.randn(1, 3, 8, 8),), ExportOptions(exporter="torchscript", opset=17),
                       cache_dir=tmp_path_factory.mktemp("export"))
    return res.path


def _agreement(table, path, disagreements, status="ok"):
    from pytest_npucheck.check import check_graph, graph_facts
    from pytest_npucheck.oracles.compare import compare

    [static] = check_graph(graph_facts(path), [table])
    row = {"model": "tiny", "exporter": "torchscript", "disagreements": disagreements, "real_status": status,
           "real_message": "" if status == "ok" else "load failed"}
    return static, {"summary": {"target": table.target, "table_sha256": table.sha256}, "models": [row]}, compare


def test_rebuilt_placements_reproduce_the_committed_comparison(exported, tmp_path):
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    static, doc, compare = _agreement(table, exported, [])
    node = next(n for n in static.nodes if n.verdict == "npu")
    # one node the compiler put on the CPU although the table said NPU
    doc["models"][0]["disagreements"] = [{"node": node.name, "real": "cpu"}]
    f = tmp_path / "agreement.json"
    f.write_text(json.dumps(doc))
    runs = _script().placements_from_agreement(f, table, [("tiny", "torchscript", exported)])
    placement = runs["tiny.torchscript"]["placement"]
    assert placement[node.name] == "cpu"
    assert {n.name for n in static.nodes} == set(placement)
    again = compare(static, placement, True)
    assert [(d.node, d.kind) for d in again.disagreements] == [(node.name, "missed_fallback")]
    assert again.agree == again.nodes - 1


def test_a_failed_build_keeps_its_status(exported, tmp_path):
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    _, doc, _ = _agreement(table, exported, [], status="load_failed")
    f = tmp_path / "agreement.json"
    f.write_text(json.dumps(doc))
    runs = _script().placements_from_agreement(f, table, [("tiny", "torchscript", exported)])
    assert runs["tiny.torchscript"] == {"status": "load_failed", "message": "load failed", "placement": {}}


def test_another_table_is_refused_by_name(exported, tmp_path):
    from pytest_npucheck.tables import Catalog

    catalog = Catalog.discover()
    _, doc, _ = _agreement(catalog.table("rknn@2.3.2/rk3588"), exported, [])
    f = tmp_path / "agreement.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match=r"agreement.json: measured with rknn@2.3.2/rk3588 .* not rknn@2.5.0/rk3588"):
        _script().placements_from_agreement(f, catalog.table("rknn@2.5.0/rk3588"), [("tiny", "torchscript", exported)])
