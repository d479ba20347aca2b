"""rules.einsum: an Einsum equation judged by its structure (the rule einsum_form), on tiny graphs."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.rules import RULES
from pytest_npucheck.rules.einsum import FORMS, equation_forms, parse_equation


@pytest.mark.parametrize("equation,forms", [
    ("bhlt,bhtv->bhlv", ["matmul"]),                         # CvT: the letters differ from bhij,bhjd->bhid
    ("mk,kn->mn", ["matmul"]),
    ("abcij,abcjk->abcik", ["matmul"]),
    ("BIJ,BJK->BIK", ["matmul"]),                            # uppercase letters are letters
    ("b i j, b j d -> b i d", ["matmul"]),                   # spaces are ignored
    ("bhlk,bhtk->bhlt", ["matmul_transpose_b"]),
    ("id,jd->ij", ["matmul_transpose_b"]),
    ("nadm,nbda->nbdm", ["matmul_transpose_all"]),
    ("bchq,bkhc->bkhq", ["matmul_transpose_all"]),
    ("nijc,ikc->nijk", ["matmul_broadcast_transpose_b"]),
    ("bhwc,hkc->bhwk", ["matmul_broadcast_transpose_b"]),
    ("nijc,jkc->nijk", ["reduce_sum_mul_broadcast_a"]),
    ("bhwc,wkc->bhwk", ["reduce_sum_mul_broadcast_a"]),
    ("bij,bjk->bki", []),                                    # the result permuted
    ("bhij,bjk->bhik", []),                                  # operands of different ranks
    ("bij,jk->bik", []),
    ("bij,bij->bij", []),                                    # Hadamard
    ("bi,bj->bij", []),                                      # outer product
])
def test_equation_forms(equation, forms):
    assert equation_forms(equation) == forms


@pytest.mark.parametrize("equation", ["...ij,...jk->...ik", "bij,bjk", "ij,jk,kl->il", "ij->ji", "i,i->i", ""])
def test_equations_without_two_letter_operands_and_an_output_parse_to_none(equation):
    assert parse_equation(equation) is None
    assert equation_forms(equation) == []


def _einsum_model(equation: str, shapes: list[list[int]]) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info(f"in{i}", TensorProto.FLOAT, s) for i, s in enumerate(shapes)]
    node = helper.make_node("Einsum", [f"in{i}" for i in range(len(shapes))], ["y"], name="e", equation=equation)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _check(equation: str, shapes: list[list[int]], forms: list[str]):
    facts = facts_from_model(_einsum_model(equation, shapes))
    [node] = [n for n in facts.nodes if n.op_type == "Einsum"]
    return RULES["einsum_form"].check(node, {"forms": forms}, facts)


def test_rule_passes_a_respelled_form_and_names_what_a_refused_one_has():
    assert _check("bhlk,bhtk->bhlt", [[1, 2, 8, 4], [1, 2, 6, 4]], ["matmul", "matmul_transpose_b"]) is None
    msg = _check("bhlk,bhtk->bhlt", [[1, 2, 8, 4], [1, 2, 6, 4]], ["matmul"])
    assert msg == "equation 'bhlk,bhtk->bhlt' has the form {'matmul_transpose_b'}, not one of {'matmul'}"
    msg = _check("bij,bjk->bki", [[2, 8, 4], [2, 4, 6]], list(FORMS))
    assert "has none of the known forms" in msg


def test_rule_refuses_other_operand_counts_and_unparsed_equations():
    assert _check("ij,jk,kl->il", [[8, 4], [4, 6], [6, 5]], list(FORMS)) == "equation 'ij,jk,kl->il' has 3 operands, not 2"
    msg = _check("...ij,...jk->...ik", [[2, 8, 4], [2, 4, 6]], list(FORMS))
    assert "is not two operands of letter subscripts" in msg


def test_requirement_text_names_the_forms():
    text = RULES["einsum_form"].describe({"forms": ["matmul", "matmul_transpose_b"]})
    assert text.startswith("the equation must have one of the forms {'matmul', 'matmul_transpose_b'}")


def test_schema_lists_exactly_the_forms_the_rule_knows():
    from pytest_npucheck.tables import bundled_tables_dir

    schema = json.loads((bundled_tables_dir() / "schema.json").read_text(encoding="utf-8"))
    rp = schema["$defs"]["rule_params"]
    assert "einsum_form" in rp["properties"]["rule"]["enum"]
    [block] = [b for b in rp["allOf"] if b["if"]["properties"]["rule"].get("const") == "einsum_form"]
    assert block["then"]["properties"]["params"]["properties"]["forms"]["items"]["enum"] == list(FORMS)
