"""Constraint rules: small named functions, registered by id.

- ``registry``: ``Rule`` (with its description hook), ``RULES``, the ``@rule`` decorator, ``is_local``;
- ``node``: rules that read one node (dtypes, shapes, attributes, constant inputs);
- ``context``: rules that read a node's neighbours in the graph as the toolchain sees it;
- ``einsum``: the rule ``einsum_form``, an Einsum equation judged by its structure, not its letters.

Importing this package registers every rule into ``RULES``.
"""

from . import context, einsum, node  # noqa: F401 - registers the rules
from .node import implicit_default, transpose_blocks
from .registry import RULES, SHAPE_UNKNOWN, Rule, RuleFn, ShapeUnknown, fmt_set, fmt_value, is_local, rule

__all__ = ["RULES", "SHAPE_UNKNOWN", "Rule", "RuleFn", "ShapeUnknown", "fmt_set", "fmt_value", "implicit_default",
           "is_local", "rule", "transpose_blocks"]
