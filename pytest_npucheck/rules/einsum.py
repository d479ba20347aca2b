"""The rule ``einsum_form``: an Einsum equation judged by its structure, not by its letters.

A compiler that lowers Einsum to MatMul recognises equations by the position of their subscripts:
``bhlk,bhtk->bhlt`` (CvT) is the same transposed-operand batched MatMul as ``bhqd,bhkd->bhqk``. A
table that lists equations as text (rule ``attr_in``) calls every respelling a fallback. The forms
below are named by what the equation does; a table lists the ones its toolchain lowers (probed:
``pytest_npucheck/probe/models_einsum_forms.py``).

An equation has a form only when it is explicit (``->``), has exactly two operands, uses only
letters (either case; spaces are ignored) and every term has at least two subscripts: an
ellipsis, an implicit output or a one-subscript term is none of the forms.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from ..graph import GraphFacts, NodeFact
from .registry import fmt_set, rule

Terms = tuple[str, str, str]


def parse_equation(equation: str) -> Optional[Terms]:
    """(left operand, right operand, result) subscripts of a two-operand explicit equation of
    letters, each term at least two long; None for any other equation."""
    eq = equation.replace(" ", "")
    if "->" not in eq:
        return None
    lhs, result = eq.split("->", 1)
    terms = lhs.split(",")
    if len(terms) != 2:
        return None
    a, b = terms
    for t in (a, b, result):
        if len(t) < 2 or not all(ch.isascii() and ch.isalpha() for ch in t):
            return None
    return a, b, result


def _same_batch(a: str, b: str, r: str) -> bool:
    """Equal ranks, and every subscript before the last two is the same in all three terms."""
    return len(a) == len(b) == len(r) and a[:-2] == b[:-2] == r[:-2]


def _matmul(a: str, b: str, r: str) -> bool:
    """(..., m, k) x (..., k, n) -> (..., m, n)."""
    return _same_batch(a, b, r) and a[-2] == r[-2] and a[-1] == b[-2] and b[-1] == r[-1]


def _matmul_transpose_b(a: str, b: str, r: str) -> bool:
    """(..., m, k) x (..., n, k) -> (..., m, n)."""
    return _same_batch(a, b, r) and a[-2] == r[-2] and a[-1] == b[-1] and b[-2] == r[-1]


def _matmul_transpose_all(a: str, b: str, r: str) -> bool:
    """Rank 4, axes 1 and 3 swapped in all three: (B, k, h, m) x (B, n, h, k) -> (B, n, h, m)."""
    return (len(a) == len(b) == len(r) == 4 and a[0] == b[0] == r[0] and a[3] == r[3] and a[1] == b[3]
            and b[1] == r[1])


def _matmul_broadcast_transpose_b(a: str, b: str, r: str) -> bool:
    """(B, H, m, k) x (H, n, k) -> (B, H, m, n): the right operand shared over B, transposed."""
    return (len(a) == 4 and len(b) == 3 and len(r) == 4 and a[2] == r[2] and a[3] == b[2] and b[1] == r[3]
            and a[0] == r[0] and a[1] == r[1] and b[0] == r[1])


def _reduce_sum_mul_broadcast_a(a: str, b: str, r: str) -> bool:
    """(B, H, W, c) x (W, k, c) -> (B, H, W, k): contracted over c, aligned on W (relative positions)."""
    return (len(a) == 4 and len(b) == 3 and len(r) == 4 and a[3] == b[2] and a[2] == b[0] == r[2]
            and b[1] == r[3] and a[0] == r[0] and a[1] == r[1])


#: form name -> test on the parsed terms; the names are what tables list
FORMS: dict[str, Callable[[str, str, str], bool]] = {
    "matmul": _matmul,
    "matmul_transpose_b": _matmul_transpose_b,
    "matmul_transpose_all": _matmul_transpose_all,
    "matmul_broadcast_transpose_b": _matmul_broadcast_transpose_b,
    "reduce_sum_mul_broadcast_a": _reduce_sum_mul_broadcast_a,
}


def equation_forms(equation: str) -> list[str]:
    """The names of the FORMS the equation has (an equation can have none, or more than one)."""
    terms = parse_equation(equation)
    return [] if terms is None else [name for name, test in FORMS.items() if test(*terms)]


@rule("einsum_form", "attribute", reads_values=False,
      words=lambda params: {"forms_set": fmt_set(params.get("forms", []))})
def rule_einsum_form(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """the equation must have one of the forms {forms_set} (two operands, letter subscripts, an explicit output; which letters does not matter)."""
    equation: Any = node.attrs.get("equation")
    if not isinstance(equation, str):
        return "the equation attribute is missing"
    if len(node.inputs) != 2:
        return f"equation {equation!r} has {len(node.inputs)} operands, not 2"
    if parse_equation(equation) is None:
        return (f"equation {equation!r} is not two operands of letter subscripts (two or more each) "
                "with an explicit output")
    found = equation_forms(equation)
    allowed = params["forms"]
    if any(f in allowed for f in found):
        return None
    has = f"has the form {fmt_set(found)}" if found else "has none of the known forms"
    return f"equation {equation!r} {has}, not one of {fmt_set(allowed)}"
