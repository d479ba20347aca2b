"""The partition's shortcut for a graph on one device (issue 8, goal 1) against its general walk.

When every live node runs on one device and the nodes are stored in topological order, the
partition skips the greedy walk and the crossing search. On a real export, with every verdict
npu, every verdict cpu, and mixed verdicts, the result must equal the general walk's.
"""

from __future__ import annotations

import dataclasses

import pytest

from pytest_npucheck import graph, partition
from pytest_npucheck.matcher import match
from pytest_npucheck.tables import Catalog

torch = pytest.importorskip("torch")


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = torch.nn.functional.max_pool2d(y, 1) + y
        return self.fc(y.flatten(1)).softmax(-1)


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    from pytest_npucheck.export import ExportOptions, export_model

    torch.manual_seed(0)
    path = export_model(_Net().eval(), torch.randn(1, 3, 8, 8), ExportOptions(exporter="torchscript", opset=17),
                        tmp_path_factory.mktemp("part")).path
    facts = graph.load_graph(path)
    return facts, match(facts, Catalog.discover().table("rknn@2.5.0/rk3588"))


def _with_verdicts(results, pick):
    return [r if r.verdict == "folded" else dataclasses.replace(r, verdict=pick(r)) for r in results]


@pytest.mark.parametrize("scheme", ["npu", "cpu", "unsupported", "alternate"])
def test_one_device_shortcut_equals_the_general_walk(checked, monkeypatch, scheme):
    facts, result = checked
    if scheme == "alternate":
        results = _with_verdicts(result.nodes, lambda r: "cpu" if r.index % 2 else "npu")
    else:
        results = _with_verdicts(result.nodes, lambda r: scheme)
    live = [r for r in results if r.verdict != "folded"]
    assert len(live) >= 5
    fast = partition.partition(facts, results).to_json()
    monkeypatch.setattr(partition, "_topological", lambda live, producer, ordered, late_read: False)
    general = partition.partition(facts, results).to_json()
    assert fast == general
    if scheme == "alternate":
        assert fast["cpu_islands"] >= 2 and fast["transitions"] >= 2
    else:
        assert len(fast["segments"]) == 1 and fast["transitions"] == 0
        assert fast["segments"][0]["nodes"] == len(live)
    if scheme in ("cpu", "unsupported"):
        assert len(fast["fallback_impact"]) == len(live)
        assert fast["macs"] > 0 and fast["macs_npu"] == 0


def test_indices_out_of_topological_order_take_the_general_walk(checked):
    """Indices that do not follow the data flow (renumbered backwards): the walk must still put every
    node after the nodes it reads from."""
    facts, result = checked
    last = len(facts.nodes) - 1
    nodes = tuple(dataclasses.replace(n, index=last - n.index) for n in facts.nodes)
    flipped = dataclasses.replace(facts, nodes=nodes, producer={}, consumers={})
    results = [dataclasses.replace(r, index=last - r.index) for r in result.nodes]
    live = [n for n, r in zip(nodes, results) if r.verdict != "folded"]
    producer = {out: n.index for n in live for out in n.outputs if out}
    assert not partition._in_topological_order(live, producer)
    part = partition.partition(flipped, results)
    order = [name for _, names in part.segments for name in names]
    assert sorted(order) == sorted(n.name for n in live)
    position = {name: k for k, name in enumerate(order)}
    for n in live:
        for inp in n.inputs:
            p = producer.get(inp)
            if p is not None:
                src = next(m for m in live if m.index == p)
                assert position[src.name] < position[n.name]
    assert part.to_json()["nodes"] == len(live)
