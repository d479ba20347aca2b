"""Fix suggestions for fallbacks, each checked by re-running the verdict on a rewritten graph.

Recipes are data (``recipes.json``), keyed by the failing rule and op. A recipe with a rewrite is
*verified*: the ONNX graph is rewritten the way the fix would change the export (an attribute set
to a value the table allows, exact GELU replaced by its tanh form, dynamic dims fixed), the graph
facts are computed again and matched against the same table, and the suggestion says how many
nodes move to the NPU. Suggestions are never guesses about the table: the table decides.

A recipe with ``exporter_artefact`` fixes a node the table rejects only because of how an exporter
wrote it (the dynamo exporter's ``allowzero=1`` on every Reshape, its explicit default ``layout=0``
on RNNs): the report says so and offers the other exporter. Fallbacks caused by constraints taken
only from vendor documentation (a ``doc:`` source, never checked on a real toolchain) are named in
a note on the result (:func:`documentation_notes`).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from .errors import NpuCheckError
from .jsonio import load_strict
from .result import NodeResult, TargetResult
from .tables import Table

RECIPES_PATH = Path(__file__).resolve().parent / "recipes.json"
_REWRITES = ("set_allowed_attr", "set_attr", "erf_to_tanh", "fix_dynamic_dims", "reshape_allowzero_off",
             "drop_default_attr", "none")
_PREFER = {"cubic": ["linear", "nearest"], "reflect": ["constant"], "edge": ["constant"], "wrap": ["constant"]}


@dataclass(frozen=True)
class Recipe:
    id: str
    title: str
    match: Mapping[str, Any]
    rewrite: Mapping[str, Any]
    advice: str
    numerics: str
    exporter_artefact: Optional[str] = None  # how an exporter wrote what the table rejects

    def applies(self, node: NodeResult) -> bool:
        op = self.match.get("op")
        if op is not None and node.op_type not in ([op] if isinstance(op, str) else op):
            return False
        rule = self.match.get("rule")
        attr = self.match.get("attr")
        if rule is None and attr is None:
            return node.falls_back
        return any((rule is None or r.rule == rule) and (attr is None or r.message.startswith(f"{attr}="))
                   for r in node.reasons)


@lru_cache(maxsize=1)
def load_recipes(path: str = str(RECIPES_PATH)) -> tuple[Recipe, ...]:
    data = load_strict(Path(path))
    problems = []
    out = []
    for i, r in enumerate(data.get("recipes", []) if isinstance(data, dict) else []):
        where = f"{path}: $.recipes[{i}]"
        missing = [k for k in ("id", "title", "match", "rewrite", "advice", "numerics") if k not in r]
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)}")
            continue
        if r["rewrite"].get("kind") not in _REWRITES:
            problems.append(f"{where}.rewrite.kind: {r['rewrite'].get('kind')!r} not in {_REWRITES}")
            continue
        out.append(Recipe(r["id"], r["title"], r["match"], r["rewrite"], r["advice"], r["numerics"],
                          r.get("exporter_artefact")))
    if problems or not out:
        raise NpuCheckError("invalid fix recipes:\n" + "\n".join(problems or [f"{path}: no recipes"]))
    return tuple(out)


@dataclass(frozen=True)
class Verification:
    fallbacks_before: int
    fallbacks_after: int
    targeted: int
    moved_to_npu: int
    fully_on_npu: bool
    error: Optional[str] = None

    def to_json(self) -> dict[str, Any]:
        return {"fallbacks_before": self.fallbacks_before, "fallbacks_after": self.fallbacks_after,
                "targeted": self.targeted, "moved_to_npu": self.moved_to_npu, "fully_on_npu": self.fully_on_npu,
                "error": self.error}


@dataclass(frozen=True)
class Suggestion:
    recipe: Recipe
    nodes: tuple[str, ...]
    verification: Optional[Verification] = None

    def to_json(self) -> dict[str, Any]:
        out = {"recipe": self.recipe.id, "title": self.recipe.title, "nodes": list(self.nodes),
               "advice": self.recipe.advice, "numerics": self.recipe.numerics,
               "verified": self.verification.to_json() if self.verification else None}
        if self.recipe.exporter_artefact:
            out["exporter_artefact"] = self.recipe.exporter_artefact
        return out


@dataclass
class FixPlan:
    suggestions: list[Suggestion] = field(default_factory=list)
    combined: Optional[Verification] = None

    def to_json(self) -> dict[str, Any]:
        return {"suggestions": [s.to_json() for s in self.suggestions],
                "combined": self.combined.to_json() if self.combined else None}


# -- rewrites on the ONNX proto -------------------------------------------------------------------

def _allowed_values(table: Table, op_key: str, attr: Optional[str]) -> dict[str, list[Any]]:
    entry = table.ops.get(op_key)
    out: dict[str, list[Any]] = {}
    for c in entry.constraints if entry else ():
        if c.rule == "attr_in" and (attr is None or c.params.get("attr") == attr):
            out[c.params["attr"]] = list(c.params["values"])
    return out


def _set_attr(node: Any, name: str, value: Any) -> None:
    from onnx import helper

    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(name, value))


def _current(node: Any, name: str) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            v = helper.get_attribute_value(a)
            return v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return None


def _rewrite(model: Any, recipe: Recipe, names: set[str], table: Table,
             input_shapes: Optional[Mapping[str, Sequence[int]]]) -> None:
    from onnx import TensorProto, helper

    kind = recipe.rewrite["kind"]
    if kind == "fix_dynamic_dims":
        for vi in model.graph.input:
            shape = (input_shapes or {}).get(vi.name)
            dims = vi.type.tensor_type.shape.dim
            for k, d in enumerate(dims):
                if not d.HasField("dim_value"):
                    d.dim_value = int(shape[k]) if shape is not None and k < len(shape) else 1
        del model.graph.value_info[:]
        for vi in model.graph.output:
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param"):
                    d.ClearField("dim_param")
        return
    nodes = [n for n in model.graph.node if n.name in names]
    if kind == "reshape_allowzero_off":  # only where the result is the same: a constant shape without a 0
        from onnx import numpy_helper

        consts = {t.name: t for t in model.graph.initializer}
        consts.update({n.output[0]: a.t for n in model.graph.node if n.op_type == "Constant"
                       for a in n.attribute if a.name == "value"})
        for n in nodes:
            shape = consts.get(n.input[1]) if len(n.input) > 1 else None
            if shape is not None and 0 not in numpy_helper.to_array(shape).tolist():
                _set_attr(n, "allowzero", 0)
    elif kind == "drop_default_attr":
        for n in nodes:
            if _current(n, recipe.rewrite["attr"]) == recipe.rewrite["default"]:
                for a in list(n.attribute):
                    if a.name == recipe.rewrite["attr"]:
                        n.attribute.remove(a)
    elif kind == "set_attr":
        for n in nodes:
            _set_attr(n, recipe.rewrite["attr"], recipe.rewrite["value"])
    elif kind == "set_allowed_attr":
        for n in nodes:
            key = f"{n.domain or 'ai.onnx'}:{n.op_type}"
            for attr, values in _allowed_values(table, key, recipe.rewrite.get("attr")).items():
                current = _current(n, attr)
                if current in values:
                    continue
                prefer = [v for v in _PREFER.get(str(current), []) if v in values]
                _set_attr(n, attr, (prefer or values)[0])
    elif kind == "erf_to_tanh":
        # erf(z) ~= tanh(2/sqrt(pi) * z * (1 + 0.044715 * 2 * z^2)): the tanh form of GELU
        c1 = 2.0 / math.sqrt(math.pi)
        c2 = c1 * 0.044715 * 2.0
        new_nodes = []
        for n in model.graph.node:
            if n.name not in names or n.op_type != "Erf":
                new_nodes.append(n)
                continue
            z, out, p = n.input[0], n.output[0], f"{n.name}/tanh_gelu"
            model.graph.initializer.extend([helper.make_tensor(f"{p}/c1", TensorProto.FLOAT, [], [c1]),
                                            helper.make_tensor(f"{p}/c2", TensorProto.FLOAT, [], [c2])])
            new_nodes += [
                helper.make_node("Mul", [z, z], [f"{p}/z2"], name=f"{p}/Mul_sq"),
                helper.make_node("Mul", [f"{p}/z2", f"{p}/c2"], [f"{p}/z2c"], name=f"{p}/Mul_c2"),
                helper.make_node("Add", [f"{p}/z2c", f"{p}/c1"], [f"{p}/poly"], name=f"{p}/Add_c1"),
                helper.make_node("Mul", [z, f"{p}/poly"], [f"{p}/arg"], name=f"{p}/Mul_z"),
                helper.make_node("Tanh", [f"{p}/arg"], [out], name=f"{p}/Tanh"),
            ]
        del model.graph.node[:]
        model.graph.node.extend(new_nodes)


def _verify(path: Path, table: Table, before: TargetResult, recipes: Sequence[tuple[Recipe, set[str]]],
            input_shapes: Optional[Mapping[str, Sequence[int]]]) -> Verification:
    from onnx import ModelProto

    from .graph import facts_from_model, load_model_proto
    from .matcher import match

    targeted = set().union(*(names for _, names in recipes)) if recipes else set()
    try:
        # the graph without its weight values, as the static check reads it: the rewrites touch
        # attributes, nodes and input dims, never weights (a 572 MiB model loaded whole peaked at 3.5 GB)
        model = load_model_proto(path, weights=False)
        work = ModelProto()
        work.CopyFrom(model)
        del model
        for recipe, names in recipes:
            _rewrite(work, recipe, names, table, input_shapes)
        after = match(facts_from_model(work, str(path)), table)
    except Exception as exc:  # a failed verification must not hide the report it decorates
        return Verification(len(before.fallbacks), len(before.fallbacks), len(targeted), 0, False,
                            f"{type(exc).__name__}: {exc}")
    verdicts = {n.name: n.verdict for n in after.nodes}
    moved = sum(1 for name in targeted if verdicts.get(name, "npu") in ("npu", "folded")
                and not any(v in ("cpu", "unsupported") for k, v in verdicts.items() if k.startswith(f"{name}/")))
    return Verification(len(before.fallbacks), len(after.fallbacks), len(targeted), moved, after.passed)


def suggest(result: TargetResult, path: Path, table: Table, verify: bool = True,
            input_shapes: Optional[Mapping[str, Sequence[int]]] = None) -> FixPlan:
    """Suggestions for every fallback of a result, most nodes first; verified where a rewrite exists."""
    recipes = load_recipes()
    plan = FixPlan()
    groups: dict[str, tuple[Recipe, list[str]]] = {}
    for node in result.fallbacks:  # a node with several causes gets a suggestion for each
        for recipe in recipes:
            if recipe.applies(node):
                groups.setdefault(recipe.id, (recipe, []))[1].append(node.name)
    if result.model_issues:
        opset = next((r for r in recipes if r.id == "opset"), None)
        if opset is not None:
            groups.setdefault(opset.id, (opset, []))
    verifiable = []
    for recipe, names in sorted(groups.values(), key=lambda g: -len(g[1])):
        check = None
        if verify and recipe.rewrite["kind"] != "none" and names:
            check = _verify(Path(path), table, result, [(recipe, set(names))], input_shapes)
            verifiable.append((recipe, set(names)))
        plan.suggestions.append(Suggestion(recipe, tuple(names), check))
    if verify and len(verifiable) > 1:
        plan.combined = _verify(Path(path), table, result, verifiable, input_shapes)
    return plan


def documentation_notes(result: TargetResult, table: Table) -> tuple[str, ...]:
    """One note per op whose fallbacks come only from constraints the table took from vendor
    documentation (source ``doc:...``): no real toolchain confirmed them."""
    by_op: dict[str, list[str]] = {}
    sources: dict[str, set[str]] = {}
    for node in result.fallbacks:
        key = f"{node.domain or 'ai.onnx'}:{node.op_type}"
        entry = table.ops.get(key)
        if entry is None or not node.reasons:
            continue
        found = []
        for reason in node.reasons:
            cs = [c for c in entry.constraints if c.rule == reason.rule]
            srcs = {str(c.source or entry.source or "") for c in cs} or {str(entry.source or "")}
            found.append(srcs)
        if found and all(srcs and all(x.startswith("doc:") for x in srcs) for srcs in found):
            by_op.setdefault(node.op_type, []).append(node.name)
            sources.setdefault(node.op_type, set()).update(*found)
    return tuple(f"{len(names)} {op} fallback(s) rest on vendor documentation only ({', '.join(sorted(sources[op]))}), "
                 f"not checked on the real {table.toolchain} toolchain" for op, names in sorted(by_op.items()))


def with_fixes(result: TargetResult, path: Path, table: Table, **kw: Any) -> TargetResult:
    """The result with its fix plan attached (only failing results get one), and a note naming the
    fallbacks that rest on vendor documentation only."""
    if result.passed:
        return result
    return replace(result, fixes=suggest(result, path, table, **kw),
                   notes=(*result.notes, *documentation_notes(result, table)))
