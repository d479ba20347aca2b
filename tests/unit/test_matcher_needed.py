"""matcher._needed and _held: the nodes on which the memo's inlined judge asks a signature's
constraints left, from the constraints' sparse tests (their gates)."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_npucheck import matcher


def _view(inputs: list[tuple[str, ...]]) -> SimpleNamespace:
    nodes = [SimpleNamespace(index=i, inputs=ins) for i, ins in enumerate(inputs)]
    consumers: dict[str, list[int]] = {}
    for i, ins in enumerate(inputs):
        for name in ins:
            if name:
                consumers.setdefault(name, []).append(i)
    return SimpleNamespace(nodes=nodes, consumers=consumers)


VIEW = _view([("a", "w"), ("b", "a"), ("a", "b"), ("", "a"), ("c",)])


def test_a_gate_of_names_holds_the_nodes_reading_one_at_its_position():
    assert matcher._held(((0, {"a"}),), VIEW) == {0, 2}
    assert matcher._held(((1, {"a"}),), VIEW) == {1, 3}
    assert matcher._held(((1, {"a", "b", "x"}),), VIEW) == {1, 2, 3}
    assert matcher._held(((0, {"x"}),), VIEW) == set()


def test_a_gate_of_indices_holds_them_and_several_gates_hold_what_all_hold():
    indices = {1, 2, 4}
    assert matcher._held(((-1, indices),), VIEW) == indices
    assert matcher._held(((-1, indices), (0, {"a"})), VIEW) == {2}
    assert indices == {1, 2, 4}  # the gate's own set is left as it was


def test_needed_is_the_union_over_the_constraints_or_none_when_one_has_no_gate():
    held: dict = {}
    todo = ((None, None, None, ((0, {"a"}),)), (None, None, None, ((-1, {4}),)))
    assert matcher._needed(todo, VIEW, held) == {0, 2, 4}
    assert len(held) == 2  # each gate's nodes found once, kept for the next signature
    assert matcher._needed(((None, None, None, ((0, {"a"}),)), (None, None, None, None)), VIEW, held) is None
    assert matcher._needed(((None, None, None, ()),), VIEW, held) is None
    # an omitted input ("") is nobody's reading in consumers: a gate holding it leaves every node asked
    assert matcher._needed(((None, None, None, ((0, {"", "a"}),)),), VIEW, held) is None


def test_needed_holds_every_node_on_which_rest_would_ask_a_rule():
    """Against _Memo.rest's own gate test, node by node."""
    gates = ((1, {"a", "b"}), (-1, {1, 3, 4}))
    need = matcher._needed(((None, None, None, gates),), VIEW, {})
    for node in VIEW.nodes:
        inputs = node.inputs
        asked = all((node.index in names) if pos < 0 else (pos < len(inputs) and inputs[pos] in names)
                    for pos, names in gates)
        assert (node.index in need) == asked
