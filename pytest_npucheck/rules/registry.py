"""The rule registry: ``Rule``, the ``@rule`` decorator that fills ``RULES``, and what every rule shares.

A rule is a small function ``(node, params, graph) -> None | message`` registered by id; its
docstring's first line, filled with the params, is the requirement in words (the supported-ops
pages, the table diffs). A rule whose words need more than the params and the common format keys
here (``{which}``, ``{values_set}``, ``{range}``) carries them itself (``words``), and a composite
names its parts (``parts``). The rules themselves live in ``rules.node`` and ``rules.context``;
importing ``pytest_npucheck.rules`` registers them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional

from ..graph import GraphFacts, NodeFact

RuleFn = Callable[[NodeFact, Mapping[str, Any], GraphFacts], Optional[str]]
WordsFn = Callable[[Mapping[str, Any]], Mapping[str, str]]  # params -> extra format keys of the docstring
PartsFn = Callable[[Mapping[str, Any]], Iterable[tuple[str, Mapping[str, Any]]]]  # params -> (rule id, params)
InnerFn = Callable[[Mapping[str, Any]], Iterable[tuple[str, Any]]]  # params -> (path in params, constraint)
SettledFn = Callable[[NodeFact, Mapping[str, Any], GraphFacts], bool]  # (node, params, graph) -> passes for sure
NeedsFn = Callable[[Mapping[str, Any]], tuple[frozenset[str], ...]]  # params -> op sets it can only fail with
# (params, graph) -> None or the (position, names) pairs of a rule's sparse test (``Rule.sparse``)
SparseFn = Callable[[Mapping[str, Any], GraphFacts], Optional[tuple[tuple[int, Any], ...]]]


@dataclass(frozen=True)
class Rule:
    id: str
    fn: RuleFn
    category: str  # dtype | shape | attribute | constant | structure | context
    local: bool = True  # False: reads the node's neighbours (rules.context), never reused between nodes
    # the rule's own description hook: format keys its docstring uses beyond the params and the
    # common ones of _Describe (``{chain_text}``), made from the params
    words: Optional[WordsFn] = None
    # a composite's parts: the (rule id, params) of the constraints its verdict is made of
    parts: Optional[PartsFn] = None
    # the constraints written inside its params (a context rule that judges a neighbour by another
    # rule): (their path under ``params``, the constraint), checked by the table validation like its own
    inner: Optional[InnerFn] = None
    # False: reads only dtypes, shapes, constness and attributes, never a constant's values (the
    # matcher then shares one verdict between nodes whose constants differ); a new rule reads them
    reads_values: bool = True
    # a context rule's test on the node's own facts alone: its op, attributes and the dtype, shape and
    # constness of its inputs and outputs (what the matcher's signature holds; never a value, a name,
    # ``node.graph`` or a neighbour). True only when the rule passes whatever the neighbours: the rule
    # returns None first thing when it holds, and the matcher asks it once per signature
    # (``matcher._Memo``) instead of running the rule on every node
    settled: Optional[SettledFn] = None
    # a context rule's op sets, from its params, that it can only fail with: it fails on no node of a
    # graph that has no node of one of these sets (a Softmax's producer_pass on Where, in a graph
    # without a Where). The matcher asks it once per graph and op (``matcher._Memo``) and drops the
    # constraints that pass on every node, instead of walking the neighbours of each node for them
    needs: Optional[NeedsFn] = None
    # a context rule's sparse test (rules.context), handed to the matcher so that it can pass a node
    # with one set lookup instead of a call of the rule: None (no test for these params and this
    # graph) or (position, names) pairs, each enough for the rule to pass: position >= 0 when the
    # node's input at that position is missing, empty or not among the names, -1 when the node's
    # index is not among them. The matcher fetches it once per signature (``matcher._Memo``)
    sparse: Optional[SparseFn] = None

    def __post_init__(self) -> None:
        # ``check`` is the rule's function itself on each instance (the method below is what a type
        # checker sees): one Python frame less per rule call, ~50,000 calls in a check of issue 29's encoder
        object.__setattr__(self, "check", self.fn)

    def check(self, node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
        return self.fn(node, params, graph)

    def describe(self, params: Mapping[str, Any]) -> str:
        """The requirement in words, from the docstring filled with the params."""
        doc = (self.fn.__doc__ or self.id).strip().splitlines()[0]
        return doc.format_map(_Describe(params, self.words(params) if self.words is not None else {}))


class _Describe(dict):  # type: ignore[type-arg]
    """Format helper: the rule's own words first, then params rendered readably, missing ones as
    sensible defaults."""

    def __init__(self, params: Mapping[str, Any], words: Mapping[str, str]) -> None:
        super().__init__(params)
        self.words = words

    def __missing__(self, key: str) -> str:
        return {"tensor": "input", "index": "0", "tensors": "all", "attr": "axis", "min": "-inf", "max": "inf"}.get(key, "?")

    def __getitem__(self, key: str) -> Any:
        if key in self.words:
            return self.words[key]
        if key == "values_set" or key == "allowed_set":
            values = super().get("values", super().get("allowed", []))
            return fmt_set(values)
        if key == "which":
            return _which(self.get("tensor", "input"), self.get("index", 0))
        if key == "range":
            lo, hi = self.get("min"), self.get("max")
            return fmt_range(lo, hi)
        value = super().__getitem__(key) if key in self else self.__missing__(key)
        return value


RULES: dict[str, Rule] = {}


def rule(rule_id: str, category: str, local: bool = True, words: Optional[WordsFn] = None,
         parts: Optional[PartsFn] = None, inner: Optional[InnerFn] = None, reads_values: bool = True,
         settled: Optional[SettledFn] = None, needs: Optional[NeedsFn] = None,
         sparse: Optional[SparseFn] = None) -> Callable[[RuleFn], RuleFn]:
    """Register the decorated function as the rule ``rule_id`` (see ``Rule`` for the hooks)."""
    def register(fn: RuleFn) -> RuleFn:
        if rule_id in RULES:
            raise RuntimeError(f"rule {rule_id} registered twice")
        RULES[rule_id] = Rule(rule_id, fn, category, local, words, parts, inner, reads_values, settled, needs, sparse)
        return fn

    return register


# -- formatting helpers -------------------------------------------------------------------------

def fmt_value(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt_value(v) for v in value) + "]"
    return repr(value)


def fmt_set(values: Iterable[Any]) -> str:
    return "{" + ", ".join(fmt_value(v) for v in values) + "}"


def fmt_range(lo: Any, hi: Any) -> str:
    left = "-inf" if lo is None else fmt_value(lo)
    right = "inf" if hi is None else fmt_value(hi)
    return f"[{left}, {right}]"


def _which(kind: str, index: Any) -> str:
    return f"every {kind}" if index == "*" else f"{kind} {index}"


class ShapeUnknown(str):
    """A rule's failure that says only that the checker could not work out a shape it needs (an
    unknown rank, or a dim that is None: see graph.DYNAMIC_DIM), not that the node has a dynamic or
    unsupported one. The matcher reports it under the reason id ``shape_unknown``."""


SHAPE_UNKNOWN = "shape_unknown"


def is_local(rule_id: str, params: Mapping[str, Any]) -> bool:
    """True when the rule's verdict depends on the node alone (composites: on all their parts)."""
    found = RULES.get(rule_id)
    if found is not None and found.parts is not None:
        return all(is_local(r, p) for r, p in found.parts(params))
    return found is None or found.local
