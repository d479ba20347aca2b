"""Graph facts x support table -> per-node verdicts. Pure: no pytest, no torch."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from .graph import GraphFacts, GraphView, NodeFact, TensorInfo, paused_gc
from .partition import node_macs, partition
from .prepass import PrepassResult, run_prepasses
from .result import SEVERITY, NodeResult, NodeResultDraft, Reason, TargetResult, source_basis
from .rules import RULES, SHAPE_UNKNOWN, ShapeUnknown, is_local
from .tables import Constraint, Table

MEMO = True  # reuse a verdict between nodes with the same signature (see _Memo); False: judge every node

# local rules that never read a constant's values (only dtype, shape, constness, attributes: each rule
# says so itself, ``Rule.reads_values``): for an op judged by these alone the values stay out of the
# memo key, so the layers of a stack, whose biases and weights differ, share one verdict. A rule that
# does not say so (a new one) has its values compared.
VALUE_FREE_RULES = frozenset(r.id for r in RULES.values() if not r.reads_values)


def _reads_values(rule_id: str, params: Mapping[str, Any]) -> bool:
    found = RULES.get(rule_id)
    if found is not None and found.parts is not None:  # a composite: whether any of its parts does
        return any(_reads_values(r, p) for r, p in found.parts(params))
    return found is None or found.reads_values


def _worst(verdicts: list[str], default: str = "npu") -> str:
    return max(verdicts, key=lambda v: SEVERITY[v]) if verdicts else default


#: said after the rule's own message when the constraint's verdict is "unsupported" (the whole model is
#: rejected: a build error or a compiler crash, not only this node)
REJECTS = "; the compiler rejects the model"


def _check_constraints(node: NodeFact, constraints: tuple[Constraint, ...], view: GraphView,
                       source: Optional[str] = None) -> list[Reason]:
    """The reasons of the failing constraints; ``source``: the op entry's source, for a constraint
    that names none of its own."""
    reasons = []
    for c in constraints:
        if c.only_ops is not None and node.key not in c.only_ops:
            continue
        if node.key in c.except_ops:
            continue
        rule = RULES[c.rule]
        message = rule.check(node, c.params, view)  # type: ignore[arg-type]
        if message:
            reasons.append(_reason(c, rule.category, message, source))
    return reasons


def _reason(c: Constraint, category: str, message: str, source: Optional[str] = None) -> Reason:
    """The reason of a failed constraint. A failure that says only that the checker could not work
    out a shape is reported under its own id (``shape_unknown``), never as the rule's finding, and
    does not move the node off the NPU: nothing in the graph makes that shape vary (a dynamic one is
    DYNAMIC_DIM, judged by the rules), so the compiler sees it static, and one lost shape must not
    turn every node after it into a fallback. The target's notes say where the shapes were lost."""
    if type(message) is ShapeUnknown:
        return Reason(SHAPE_UNKNOWN, message, "npu", "shape", "inferred")
    src = c.source or source
    if c.on_fail == "unsupported":
        message = message + REJECTS
    return Reason(c.rule, message, c.on_fail, category, source_basis(src), src)


def judge_node(node: NodeFact, table: Table, view: GraphView) -> tuple[str, list[Reason]]:
    """Verdict and reasons for one node that the pre-passes left in place."""
    entry = table.ops.get(node.key)
    if entry is None:
        verdict = table.default_verdict
        what = "has no CPU fallback: the compiler rejects it" if verdict == "unsupported" else "falls back to the CPU"
        return verdict, [Reason("op_missing", f"{node.key} is not supported by {table.target} ({what})", verdict,
                                "op", *_missing_basis(table))]
    basis, src = source_basis(entry.source), entry.source
    if entry.opset is not None and not entry.opset[0] <= node.opset <= entry.opset[1]:
        return "unsupported", [Reason("opset", f"opset {node.opset} outside the supported range "
                                      f"[{entry.opset[0]}, {entry.opset[1]}] for {node.op_type}", "unsupported", "opset",
                                      basis, src)]
    if entry.status == "cpu":
        note = f" ({entry.note})" if entry.note else ""
        cpu = Reason("cpu_only", f"{node.op_type} has only a CPU implementation in {table.target}{note}", "cpu", "op",
                     basis, src)
        # an op the NPU never runs can still make the compiler reject the whole model: its constraints
        # that say "unsupported" are checked (the others could only say "cpu" again)
        rejecting = [c for c in entry.constraints if c.on_fail == "unsupported"]
        reasons = _check_constraints(node, rejecting, view, src) if rejecting else []
        return ("unsupported", reasons + [cpu]) if reasons else ("cpu", [cpu])
    if entry.status == "unsupported":
        note = f" ({entry.note})" if entry.note else ""
        return "unsupported", [Reason("op_unsupported", f"{node.op_type} is rejected by the {table.toolchain} compiler{note}",
                                      "unsupported", "op", basis, src)]
    reasons = (_check_constraints(node, table.generic_constraints, view)
               + _check_constraints(node, entry.constraints, view, entry.source))
    return _worst([r.verdict for r in reasons]), reasons


def _missing_basis(table: Table) -> tuple[str, Optional[str]]:
    """(basis, source) of the verdict on an op the table does not list: a documented table lists
    what the vendor's pages list (an op they omit is documented as unsupported: the source of most
    of its entries); a probed table's default for an op it never probed is inferred."""
    if not table.documented_only:
        return "inferred", None
    counts: dict[str, int] = {}
    for e in table.ops.values():
        counts[e.source] = counts.get(e.source, 0) + 1
    return "documented", max(counts, key=lambda k: counts[k]) if counts else None


def _table_basis(table: Table) -> tuple[str, Optional[str]]:
    """(basis, source) of what the table says as a whole: pre-passes, opset and IR ranges."""
    src = table.probe_source
    if src is not None:
        return "probed", src
    return ("documented", None) if table.documented_only else ("inferred", None)


def match(graph: GraphFacts, table: Table, pre: PrepassResult | None = None) -> TargetResult:
    """Judge every node of the graph (subgraph bodies included) against one table."""
    with paused_gc():
        return _match(graph, table, pre)


class _Memo:
    """Verdicts of one table reused between nodes that look the same to the rules that judge them.

    A transformer repeats one layer: its ~9,000 nodes have a few dozen distinct signatures. The
    signature is everything a *local* rule (``rules.Rule.local``) may read: the op and its opset,
    the attributes (values, which were written, the schema defaults) and, for each input and
    output position, whether it is present and its TensorInfo as the toolchain sees it after the
    pre-passes (dtype, shape, constness, and the constant's values if a rule of the op reads
    values, see VALUE_FREE_RULES) -- never a tensor's name. Only the local constraints are
    memoized (``rules.is_local``); context rules read neighbours and are checked per node, in
    table order. Only a clean local result (no reason) is reused: reasons name the node's own
    tensors, so a node with a local reason is judged, and its messages rendered, on its own.

    An ``any_of`` that mixes local and context alternatives passes as soon as one alternative
    passes, whatever the order: the memo records per signature whether one of its local
    alternatives passes; when none does, a node of that signature runs only the context
    alternatives (the local ones fail on each of its nodes), and only when none of those passes is
    the whole ``any_of`` judged for the node (so its message, which lists every alternative, is
    rendered exactly as without the memo). Likewise a
    context rule whose own facts settle it (``rules.Rule.settled``: a Transpose by another perm, a
    Reshape that is no rank-6 view) is asked that once per signature and run only on the nodes of
    the signatures it does not settle. A context rule that cannot fail in this graph at all
    (``rules.Rule.needs``: a producer_pass on Where in a graph without a Where) is left out of the
    op's plan: no node is asked it.
    """

    __slots__ = ("table", "view", "clean", "plans", "defaults", "attrs", "hits", "dynamic_rank", "macs", "ops")

    def __init__(self, table: Table, view: GraphView) -> None:
        self.table, self.view = table, view
        # signature whose local constraints all pass -> (the per-node constraints it does not settle
        # (``_unsettled``: see the class's docstring), the MACs of its nodes)
        self.clean: dict[tuple[Any, ...], tuple[tuple[tuple[Any, ...], ...], int]] = {}
        self.plans: dict[str, Optional[tuple[Any, ...]]] = {}  # op key -> None (judged alone) or a plan
        self.defaults: dict[int, str] = {}  # id(schema defaults) -> repr (the dicts live as long as the graph)
        self.attrs: dict[int, str] = {}  # id(attributes) -> repr: graph.build shares one dict between the
        # nodes of one op with the same attributes (every layer of a stack)
        self.hits = 0
        self.dynamic_rank = bool(view.graph.dynamic_rank)
        # node index -> its MACs (partition.node_macs), for the nodes judged through a signature: the
        # MACs read only what the signature holds (the op, its attributes, its tensors' shapes and
        # constness), so they are computed once per signature and handed to the partition
        self.macs: dict[int, int] = {}
        self.ops: Optional[frozenset[str]] = None  # the graph's op types (_ops), made when a plan first asks

    def _plan(self, key: str) -> Optional[tuple[Any, ...]]:
        """(local constraints, per-node constraints as (constraint, its rule, its mixed any_of index or
        -1), the (local, context) alternatives of each mixed any_of, whether the key holds values, the
        opset range, the op entry's source)."""
        if key in self.plans:
            return self.plans[key]
        entry = self.table.ops.get(key)
        plan = None
        if entry is not None and entry.status not in ("cpu", "unsupported"):
            applicable = [c for c in self.table.generic_constraints + entry.constraints
                          if (c.only_ops is None or key in c.only_ops) and key not in c.except_ops]
            local = tuple(c for c in applicable if is_local(c.rule, c.params))
            per_node, mixed = [], []
            for c in applicable:
                if is_local(c.rule, c.params) or _passes_in(c.rule, c.params, self._ops()):
                    continue  # a context rule that passes on every node of this graph is not asked of any
                subs = [s for s in c.params.get("constraints", ()) if is_local(s["rule"], s.get("params", {}))] \
                    if c.rule == "any_of" else []
                if subs:
                    per_node.append((c, RULES[c.rule], len(mixed)))
                    mixed.append((tuple((RULES[s["rule"]], s.get("params", {})) for s in subs),
                                  tuple((RULES[s["rule"]], s.get("params", {})) for s in c.params["constraints"]
                                        if not is_local(s["rule"], s.get("params", {})))))
                else:
                    per_node.append((c, RULES[c.rule], -1))
            values = any(_reads_values(c.rule, c.params) for c in local) or any(
                _reads_values(r.id, p) for subs, _ in mixed for r, p in subs)
            plan = (local, tuple(per_node), tuple(mixed), values, entry.opset, entry.source)
        self.plans[key] = plan
        return plan

    def _ops(self) -> frozenset[str]:
        """The op types of every node of the graph (subgraph bodies included), once per graph."""
        if self.ops is None:
            graph = self.view.graph
            by_op = graph.main_nodes_by_op  # made by the pre-passes: every node unless the graph has bodies
            self.ops = frozenset(by_op) if sum(map(len, by_op.values())) == len(graph.nodes) else frozenset(
                {n.op_type for n in graph.nodes})
        return self.ops

    def judge(self, node: NodeFact) -> tuple[str, list[Reason]]:
        plan = self.plans.get(node.key, _NO_PLAN)
        if plan is _NO_PLAN:
            plan = self._plan(node.key)
        if plan is None:
            return judge_node(node, self.table, self.view)
        local, per_node, mixed, values, opset, source = plan
        if opset is not None and not opset[0] <= node.opset <= opset[1]:
            return judge_node(node, self.table, self.view)
        view = self.view
        ios = _ios(node, values, view.tensor)
        d = self.defaults.get(id(node.defaults))
        if d is None:
            d = self.defaults[id(node.defaults)] = repr(node.defaults)
        a = self.attrs.get(id(node.attrs))
        if a is None:
            a = self.attrs[id(node.attrs)] = repr(node.attrs)
        if self.dynamic_rank and any(x and x[1] is None for x in ios):
            return judge_node(node, self.table, view)  # a rank unknown to the checker or dynamic: not in the key
        sig = (node.key, node.opset, a, node.explicit_attrs, d, len(node.inputs), ios)
        try:
            todo = self.clean.get(sig)
        except TypeError:  # a fact that cannot be hashed (not built by graph.build): judge this node alone
            return judge_node(node, self.table, view)
        if todo is not None:
            self.hits += 1
            todo, self.macs[node.index] = todo  # (the constraints left, the MACs)
        elif _check_constraints(node, local, view):
            return judge_node(node, self.table, view)  # a local reason: everything per node, in table order
        else:
            todo, macs = _unsettled(node, per_node, mixed, view), node_macs(node, view)
            self.clean[sig] = todo, macs
            self.macs[node.index] = macs
        if not todo:
            return "npu", []
        return self.rest(node, todo)

    def rest(self, node: NodeFact, todo: tuple[tuple[Any, ...], ...]) -> tuple[str, list[Reason]]:
        """Verdict and reasons of a node whose signature's local constraints all pass: its per-node
        constraints left (``_unsettled``), in table order."""
        view, source = self.view, self.plans[node.key][5]  # type: ignore[index]
        reasons = []
        for c, rule, context, gates in todo:
            if gates is not None:  # the rule's sparse tests (Rule.sparse): one that leaves the node out passes it
                inputs = node.inputs
                for pos, names in gates:
                    if (node.index not in names) if pos < 0 else (pos >= len(inputs) or inputs[pos] not in names):
                        break
                else:
                    gates = None
                if gates is not None:
                    continue
            # a mixed any_of none of whose local alternatives passes on this signature passes as soon as
            # one of its context alternatives does (the local ones are not run again); else the whole
            # any_of runs, for its message
            if context is not None and any(r.check(node, p, view) is None  # type: ignore[arg-type]
                                           for r, p in context):
                continue
            message = rule.check(node, c.params, view)  # type: ignore[arg-type]
            if message:
                reasons.append(_reason(c, rule.category, message, source))
        return (_worst([r.verdict for r in reasons]), reasons) if reasons else ("npu", reasons)


def _passes_in(rule_id: str, params: Mapping[str, Any], ops: frozenset[str]) -> bool:
    """Whether a context constraint passes on every node of a graph whose nodes have the op types
    ``ops``: its rule fails only with a node of each of its ``needs`` sets (``rules.Rule.needs``) and
    the graph has none of one of them; an ``any_of`` passes when one of its alternatives does."""
    if rule_id == "any_of":
        return any(_passes_in(s["rule"], s.get("params", {}), ops) for s in params.get("constraints", ()))
    rule = RULES.get(rule_id)
    return rule is not None and rule.needs is not None and any(ops.isdisjoint(need) for need in rule.needs(params))


def _unsettled(node: NodeFact, per_node: tuple[Any, ...], mixed: tuple[Any, ...],
               view: GraphView) -> tuple[tuple[Any, ...], ...]:
    """The per-node constraints a signature leaves to check on each of its nodes, in table order, as
    (constraint, its rule, the context alternatives of a mixed any_of or None, its gates): the others
    pass on every node with the signature of ``node`` (a local alternative of the any_of passes, or the
    rule's own facts say it passes: ``Rule.settled``). Asked once per signature, on its first node.

    The gates are the rule's sparse tests (``Rule.sparse``; of the context alternatives, for a mixed
    any_of), fetched here once per signature: a node one of them leaves out passes the constraint, which
    ``judge`` then tells with a set lookup instead of calling the rule (6,900 calls in a check of issue
    29's encoder, most of them passed so); None: no test, the rule is asked."""
    passes = [any(r.check(node, p, view) is None for r, p in local) for local, _ in mixed]
    return tuple([(c, rule, mixed[j][1] if j >= 0 else None,
                   _gates(mixed[j][1] if j >= 0 else ((rule, c.params),), view)) for c, rule, j in per_node
                  if not ((j >= 0 and passes[j]) or (rule.settled is not None and rule.settled(node, c.params, view)))])


def _ios(node: NodeFact, values: bool, tensor: Callable[[str], Optional[TensorInfo]]) -> tuple[Any, ...]:
    """The memo key's part from the node's tensors: per input and output position what a local rule
    may read of its tensor, dtype, shape, constness and, if a rule of the op reads values (``values``),
    the values; "" for an omitted one, None for one the graph knows nothing of (inputs and outputs in
    one tuple, the number of inputs in the key: one comprehension a node, not two). Asked by
    ``_Memo.judge`` and by its copy inlined in ``_match``, so that both make the same key."""
    if values:
        return tuple(["" if not n else None if (t := tensor(n)) is None else (t.dtype, t.shape, t.const, t.value)
                      for n in node.inputs + node.outputs])
    return tuple(["" if not n else None if (t := tensor(n)) is None else (t.dtype, t.shape, t.const)
                  for n in node.inputs + node.outputs])


def _gates(rules: tuple[tuple[Any, Mapping[str, Any]], ...], view: GraphView) -> Optional[tuple[tuple[int, Any], ...]]:
    """The sparse test (``Rule.sparse``) of the first of alternatives (rule, params) any one of which
    passing passes the constraint, or None. Only the first: it is asked of every node, so its set is made
    anyway; a later one's only when a node gets that far (see ``rules.node._any_of_gate``)."""
    rule, params = rules[0] if rules else (None, None)
    return rule.sparse(params, view) if rule is not None and rule.sparse is not None else None


_NO_PLAN = object()  # an op key the memo has not planned yet


def _needed(todo: tuple[tuple[Any, ...], ...], view: GraphView,
            held: dict[tuple[tuple[int, int], ...], set[int]]) -> Optional[set[int]]:
    """The indices of the nodes on which ``_Memo.rest`` asks a rule of the constraints left ``todo``
    (``_unsettled``'s), or None (every node): a constraint is asked of a node only when each of its
    gates (``Rule.sparse``: node indices, or the names an input position may read) holds the node, and
    every other node passes them all, its verdict "npu" without a call (most of the 5,700 such nodes
    of issue 29's encoder: Reshapes, MatMuls, Gemms). ``held``: the gates' (position, id(set)) -> the
    nodes all of them hold, shared between the signatures whose constraints have the same gates."""
    need: set[int] = set()
    for _c, _rule, _context, gates in todo:
        if not gates or any(pos >= 0 and "" in names for pos, names in gates):
            # a rule asked of every node (no sparse test, or one with no gate), or a gate that holds an
            # omitted input, whose nodes ``consumers`` does not list
            return None
        key = tuple([(pos, id(names)) for pos, names in gates])  # the gates' sets outlive the loop
        found = held.get(key)
        if found is None:
            found = held[key] = _held(gates, view)
        need |= found
    return need


def _held(gates: tuple[tuple[int, Any], ...], view: GraphView) -> set[int]:
    """The nodes each of the (one or more) gates holds, found from the gates' own sets (a gate of
    names: their readers at its position, from ``consumers``), not by testing every node."""
    nodes, consumers = view.nodes, view.consumers
    found: Optional[set[int]] = None
    for pos, names in gates:
        mine = set(names) if pos < 0 else {i for name in names for i in consumers.get(name, ())
                                           if pos < len(inputs := nodes[i].inputs) and inputs[pos] == name}
        found = mine if found is None else found & mine
    return found  # type: ignore[return-value]  (gates: never empty)


def _before_rewrites_reasons(node: NodeFact, table: Table, view: GraphView) -> list[Reason]:
    """The failing ``before_rewrites`` constraints of a node the pre-passes fold or fuse: the compiler
    checks them, or fails on them, before or while it rewrites the graph (RKNN: BatchNormalization's
    training_mode, attention with constant queries)."""
    entry = table.ops.get(node.key)
    if entry is None or not any(c.before_rewrites for c in entry.constraints):
        return []
    out = []
    for c in entry.constraints:
        if c.before_rewrites:
            rule = RULES[c.rule]
            message = rule.check(node, c.params, view)  # type: ignore[arg-type]
            if message:
                out.append(_reason(c, rule.category, message, entry.source))
    return out


def _match(graph: GraphFacts, table: Table, pre: PrepassResult | None) -> TargetResult:
    pre = pre if pre is not None else run_prepasses(graph, table)
    view = pre.view  # made by the pre-passes once every constant was folded, if they needed it
    if view is None or view.graph is not graph:
        view = GraphView(graph, pre)
    whole = _table_basis(table)
    memo = _Memo(table, view) if MEMO else None
    judge = memo.judge if memo is not None else (lambda node: judge_node(node, table, view))
    results = []
    append, new, draft = results.append, object.__new__, NodeResultDraft
    # what the partition replays, collected here (no second pass over the nodes there): the main graph's
    # nodes that stay, in graph order, with their verdicts and their signature's MACs (None: computed there)
    placed: list[tuple[NodeFact, str, Optional[int]]] = []
    place, macs_of = placed.append, (memo.macs if memo is not None else {}).get
    folded, shared = pre.folded, {}  # a folded node's reasons, shared by the nodes with the same message
    absorbed, fused = pre.absorbed, pre.fused
    # the ops with a before_rewrites constraint: only their folded or fused nodes are judged again
    rewritten = frozenset(k for k, e in table.ops.items() if any(c.before_rewrites for c in e.constraints))
    # their op types, tested first: a folded node of another op (most of them, Constants and Identities)
    # is let through by one lookup of its op type
    rewritten_ops = frozenset(k.rpartition(":")[2] for k in rewritten)
    # what the inlined memo reads (see the loop's judging branch)
    inline = memo is not None
    if memo is not None:
        plans, clean_get, reprs_get, attrs_get = memo.plans, memo.clean.get, memo.defaults.get, memo.attrs.get
        tensor, dynamic_rank, rest = view.tensor, memo.dynamic_rank, memo.rest
        # id(a signature's constraints left) -> the nodes some of them is asked of (_needed); the
        # tuples live in memo.clean as long as this loop
        needs: dict[int, Optional[set[int]]] = {}
        held: dict[tuple[tuple[int, int], ...], set[int]] = {}  # gates -> _held's (see _needed)
        needed = needs.get
    for node in graph.nodes:
        i = node.index
        fused_into = macs = None
        why = folded.get(i)
        if why is not None:
            into = absorbed.get(i)
            if into is not None and into < len(results) and results[into].verdict in ("cpu", "unsupported"):
                # fused into a node that leaves the NPU (a BatchNorm into a Conv whose shape is dynamic):
                # the fused op runs where that node runs
                verdict = "cpu"
                reasons = (Reason("prepass", f"{why}, which runs on the CPU", "cpu", "prepass", *whole),)
            else:
                reasons = shared.get(why)
                if reasons is None:
                    reasons = shared[why] = (Reason("prepass", why, "folded", "prepass", *whole),)
                verdict = "folded"
            if node.op_type in rewritten_ops and node.key in rewritten:
                rejected = _before_rewrites_reasons(node, table, view)
                if rejected:
                    verdict, reasons = "unsupported", (*rejected, *reasons)
        elif i in fused:
            pattern, anchor = fused[i]
            fused_into = f"{pattern.fused_op} ({pattern.name}, anchored at {graph.nodes[anchor].name})"
            verdict = pattern.status
            what = "which runs on the CPU" if verdict == "cpu" else "which the compiler rejects (no CPU fallback)"
            note = f" ({pattern.description})" if pattern.description else ""
            if verdict == "npu" and i in pre.fused_cpu:
                verdict, what = "cpu", "but the compiler leaves this node on the CPU"
            reasons = () if verdict == "npu" else (Reason("pattern", f"fused into {fused_into}, {what}{note}", verdict,
                                                          "op", source_basis(pattern.source), pattern.source),)
            if node.op_type in rewritten_ops and verdict in ("folded", "npu", "cpu") and node.key in rewritten:
                rejected = _before_rewrites_reasons(node, table, view)
                if rejected:
                    verdict, reasons = "unsupported", (*rejected, *reasons)
        elif inline:
            # the memo's judge (_Memo.judge) inlined for its most frequent case, a node whose signature
            # was seen with all its local constraints passing (all but 29 of issue 29's encoder's 11,700
            # judged nodes): no call for the key, its MACs handed on directly, and only a node with
            # per-node constraints left asks the memo (``rest``). Any other node (its signature's first,
            # a local reason, an opset outside the entry's range) is judged by the memo as before
            plan = plans.get(node.key, _NO_PLAN)
            todo = None
            if plan is not None and plan is not _NO_PLAN and ((opset := plan[4]) is None
                                                              or opset[0] <= node.opset <= opset[1]):
                ios = _ios(node, plan[3], tensor)
                d, a = reprs_get(id(node.defaults)), attrs_get(id(node.attrs))
                if d is not None and a is not None and not (dynamic_rank and any(x and x[1] is None for x in ios)):
                    try:
                        todo = clean_get((node.key, node.opset, a, node.explicit_attrs, d, len(node.inputs), ios))
                    except TypeError:
                        pass
            if todo is not None:
                memo.hits += 1  # type: ignore[union-attr]
                todo, macs = todo
                if todo and (need := needed(id(todo), _NO_PLAN)) is _NO_PLAN:
                    need = needs[id(todo)] = _needed(todo, view, held)
                if todo and (need is None or i in need):
                    verdict, reasons = rest(node, todo)
                    reasons = tuple(reasons)
                else:  # no constraint left, or the sparse tests of every one left leave the node out
                    verdict, reasons = "npu", ()
            else:
                verdict, reasons = judge(node)
                reasons = tuple(reasons)
                macs = macs_of(i)
        else:
            verdict, reasons = judge(node)
            reasons = tuple(reasons)
            macs = macs_of(i)
        # the NodeResult built as a draft (result.NodeResultDraft: one per node per table, without the
        # frozen __init__), then made the NodeResult it lays out
        result = new(draft)
        result.index, result.name, result.op_type, result.domain = i, node.name, node.op_type, node.domain
        result.verdict, result.reasons, result.graph = verdict, reasons, node.graph
        result.source, result.fused_into = node.source, fused_into
        result.__class__ = NodeResult
        append(result)
        if verdict != "folded" and not node.graph:
            place((node, verdict, macs))
    issues = []
    if table.ir_version is not None and not table.ir_version[0] <= graph.ir_version <= table.ir_version[1]:
        lo, hi = table.ir_version
        issues.append(Reason("ir_version", f"model IR version {graph.ir_version} outside the range [{lo}, {hi}] "
                             f"that {table.target} loads: the whole model is rejected (re-export with "
                             f"an older ONNX IR, e.g. onnx.version_converter or the TorchScript exporter)",
                             "unsupported", "opset", *whole))
    for domain, version in sorted(graph.opsets.items()):
        if domain not in table.opsets:
            if any(n.domain == domain for n in graph.nodes):
                issues.append(Reason("opset", f"the model uses domain {domain!r} (opset {version}), "
                                     f"which {table.target} does not import", "unsupported", "opset", *whole))
            continue
        lo, hi = table.opsets[domain]
        if not lo <= version <= hi:
            issues.append(Reason("opset", f"model opset {version} for domain {domain!r} outside the range "
                                 f"[{lo}, {hi}] that {table.target} accepts", "unsupported", "opset", *whole))
    notes = []
    for name in graph.inputs:
        info = graph.tensor(name)
        if info is not None and info.shape is not None and not info.static:
            dims = ", ".join("?" if d is None else str(d) for d in info.shape if not isinstance(d, int))
            notes.append(f"model input '{name}' has dynamic dims ({dims}); NPU compilers plan for fixed shapes: "
                         "export with static shapes or give the toolchain its shape profiles")
    lost = graph.shape_unknown_at
    if lost:
        shown = ", ".join(lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
        notes.append(f"the checker could not infer the output shape of {len(lost)} node(s) ({shown}); nothing "
                     "makes those shapes vary at run time, so they are not judged dynamic, and rules that need "
                     "their dims say shape_unknown")
    if graph.shape_inference_error:
        notes.append(f"ONNX shape inference stopped early ({graph.shape_inference_error}); "
                     "rules that need the missing shapes report them as unknown")
    return TargetResult(
        target=table.target, table=table.header(), model=model_info(graph), nodes=tuple(results),
        model_issues=tuple(issues), notes=tuple(notes), partition=partition(graph, results, view, placed),
    )


def model_info(graph: GraphFacts) -> Mapping[str, Any]:
    return {
        "path": graph.path,
        "opsets": dict(sorted(graph.opsets.items())),
        "producer": graph.producer_name,
        "inputs": {n: graph.tensors[n].to_json() if n in graph.tensors else None for n in graph.inputs},
        "node_count": len(graph.nodes),
    }
