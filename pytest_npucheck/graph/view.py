"""The graph facts as a toolchain sees them after its pre-passes (``prepass.run_prepasses``)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Protocol

from .facts import GraphFacts, TensorInfo


class Passed(Protocol):
    """What the pre-passes found (``prepass.PrepassResult``), as far as the view reads it."""

    folded: Mapping[int, str]  # node index -> why the compiler removes it
    const: Mapping[str, TensorInfo]  # tensors that became constants


class GraphView:
    """Graph facts as the toolchain sees them after its pre-passes (constants folded)."""

    def __init__(self, graph: GraphFacts, pre: Passed) -> None:
        self.graph = graph
        self.pre = pre
        # tensor(name): the folded constant, else the graph's tensor. Read for every rule and every
        # node (and the memo's signatures, the partition's MACs): one dict, looked up without a Python
        # call. The view is made once the pre-passes are done (pre.const no longer changes).
        merged = dict(graph.tensors)
        merged.update(getattr(pre, "shapes", {}))  # shapes that depend on data the compiler leaves to run time
        merged.update(pre.const)
        self.tensor: Callable[[str], Optional[TensorInfo]] = merged.get
        # what the context rules read of every node they judge, without the __getattr__ detour
        self.nodes, self.producer, self.consumers, self.outputs = graph.nodes, graph.producer, graph.consumers, graph.outputs

    def __getattr__(self, item: str) -> Any:
        return getattr(self.graph, item)
