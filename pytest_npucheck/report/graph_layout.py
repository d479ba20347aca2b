"""Layered drawing of a directed acyclic graph (the Sugiyama framework), for the HTML report's picture.

Steps, each an established one:

1. **chain collapse** (optional, by the caller's predicate): a run of more than ``min_run`` nodes
   that each have one producer and one consumer and satisfy the predicate (the report: NPU-only)
   becomes one box, so a long backbone does not push the interesting part off the screen;
2. **layering by longest path** from the sources, then each source moved down next to its first
   consumer (constants and side inputs do not all sit on the first row);
3. **dummy nodes** on every edge that spans more than one layer, so long edges (skip connections)
   are routed through the layers beside the main column instead of across it;
4. **crossing reduction by the barycentre heuristic** (Sugiyama, Tagawa and Toda 1981): layers are
   re-ordered by the mean position of their neighbours, sweeping down then up, keeping the best
   order seen;
5. **coordinates**: each layer packed left to right in its order, then a few passes pull every box
   towards the mean x of its neighbours (priority to real nodes, never reordering, never overlapping).

Time is linear in nodes plus dummies per sweep; the number of sweeps is fixed, so thousands of
nodes lay out in bounded time (benchmarks/run.py measures a 5,000-node graph). Pure Python, no pytest,
torch or onnx.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

__all__ = ["Box", "Layout", "layout"]


@dataclass
class Box:
    """A drawn box: one node, or a collapsed run of nodes (``members``); dummies are not boxes."""

    members: list[int]
    layer: int = 0
    x: float = 0.0
    y: float = 0.0

    @property
    def collapsed(self) -> bool:
        return len(self.members) > 1


@dataclass
class Layout:
    boxes: list[Box]
    edges: list[tuple[int, int, list[tuple[float, float]]]]  # box from, box to, points (dummies) between
    width: float
    height: float
    box_of: dict[int, int] = field(default_factory=dict)  # node index -> box index


def _collapse(n: int, succ: list[list[int]], pred: list[list[int]], keep: Callable[[int], bool],
              min_run: int) -> list[list[int]]:
    """Groups of node indices, in topological order: chains of collapsible nodes as one group."""
    inner = [len(pred[v]) == 1 and len(succ[v]) == 1 and keep(v) for v in range(n)]
    groups: list[list[int]] = []
    seen = [False] * n
    for v in range(n):  # in topological order: a chain is met at its first node
        if seen[v]:
            continue
        seen[v] = True
        if not inner[v]:
            groups.append([v])
            continue
        run = [v]
        while inner[succ[run[-1]][0]] and not seen[succ[run[-1]][0]]:
            run.append(succ[run[-1]][0])
            seen[run[-1]] = True
        groups += [run] if len(run) >= min_run else [[u] for u in run]
    return groups


def layout(n: int, edges: Sequence[tuple[int, int]], widths: Callable[[int], float], *,
           collapsible: Optional[Callable[[int], bool]] = None, min_run: int = 5, collapsed_width: float = 150.0,
           layer_gap: float = 64.0, box_height: float = 34.0, gap: float = 14.0, dummy_width: float = 10.0,
           sweeps: int = 6, margin: float = 10.0) -> Layout:
    """Lay out nodes ``0..n-1`` (in topological order) with ``edges`` (producer, consumer).

    ``widths(v)``: a node's box width. ``collapsible(v)``: whether a node may be folded into a run."""
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    seen_edges = set()
    for a, b in edges:
        if a == b or not (0 <= a < n and 0 <= b < n):
            continue
        if a > b:  # against the topological order: drawn reversed (a cycle cannot be layered)
            a, b = b, a
        if (a, b) in seen_edges:
            continue
        seen_edges.add((a, b))
        succ[a].append(b)
        pred[b].append(a)
    groups = (_collapse(n, succ, pred, collapsible, min_run) if collapsible is not None
              else [[v] for v in range(n)])
    box_of = {v: k for k, g in enumerate(groups) for v in g}
    boxes = [Box(members=g) for g in groups]
    m = len(boxes)
    bsucc: list[list[int]] = [[] for _ in range(m)]
    bpred: list[list[int]] = [[] for _ in range(m)]
    bedges = set()
    for a, b in seen_edges:
        x, y = box_of[a], box_of[b]
        if x != y and (x, y) not in bedges:
            bedges.add((x, y))
            bsucc[x].append(y)
            bpred[y].append(x)
    # 2) longest-path layering (groups are in topological order), sources moved next to their consumer
    layer = [0] * m
    for v in range(m):
        layer[v] = 1 + max((layer[p] for p in bpred[v]), default=-1)
    for v in range(m - 1, -1, -1):
        if not bpred[v] and bsucc[v]:
            layer[v] = max(layer[v], min(layer[s] for s in bsucc[v]) - 1)
    # 3) dummies: node ids m.. ; each long edge becomes a chain through every layer it spans
    width_of: list[float] = [collapsed_width if boxes[v].collapsed else widths(boxes[v].members[0]) for v in range(m)]
    lay_of: list[int] = list(layer)
    up: list[list[int]] = [[] for _ in range(m)]  # neighbours in the layer above
    down: list[list[int]] = [[] for _ in range(m)]
    chains: list[tuple[int, int, list[int]]] = []
    for a, b in sorted(bedges):
        prev, mids = a, []
        for L in range(layer[a] + 1, layer[b]):
            d = len(lay_of)
            lay_of.append(L)
            width_of.append(dummy_width)
            up.append([prev])
            down.append([])
            down[prev].append(d)
            mids.append(d)
            prev = d
        down[prev].append(b)
        up[b].append(prev)
        chains.append((a, b, mids))
    total = len(lay_of)
    depth = max(lay_of, default=-1) + 1
    rows: list[list[int]] = [[] for _ in range(depth)]
    for v in range(total):
        rows[lay_of[v]].append(v)
    # 4) barycentre crossing reduction
    pos = [0.0] * total
    for row in rows:
        for i, v in enumerate(row):
            pos[v] = float(i)

    def crossings() -> int:
        count = 0
        for r in range(depth - 1):
            row = rows[r]
            if len(row) == 1 and len(down[row[0]]) <= 1:
                continue  # one edge cannot cross another
            pairs = sorted((pos[v], pos[w]) for v in row for w in down[v])
            count += _inversions([p[1] for p in pairs])
        return count

    best = [list(r) for r in rows]
    best_c = crossings() if total < 20000 else None
    for s in range(sweeps):
        order = range(1, depth) if s % 2 == 0 else range(depth - 2, -1, -1)
        for r in order:
            nbrs = up if s % 2 == 0 else down
            row = rows[r]
            key = {}
            for v in row:
                ns = nbrs[v]
                key[v] = sum(pos[w] for w in ns) / len(ns) if ns else pos[v]
            row.sort(key=lambda v: key[v])
            for i, v in enumerate(row):
                pos[v] = float(i)
        if best_c is not None:
            c = crossings()
            if c < best_c:
                best_c, best = c, [list(r) for r in rows]
    if best_c is not None:
        rows = best
    # 5) coordinates: packed, then pulled towards neighbours without overlap or reordering
    x = [0.0] * total
    for row in rows:
        cur = 0.0
        for v in row:
            x[v] = cur + width_of[v] / 2
            cur += width_of[v] + gap
    for it in range(4):
        for r in (range(depth) if it % 2 == 0 else range(depth - 1, -1, -1)):
            row = rows[r]
            want = []
            for v in row:
                ns = up[v] + down[v]
                want.append(sum(x[w] for w in ns) / len(ns) if ns else x[v])
            # place left to right at the wanted x, each pushed right of the previous box; then right to
            # left, each pushed left of the next; the mean of two orderly placements is orderly
            ltr, cur = [], float("-inf")
            for v, w in zip(row, want):
                left = max(w - width_of[v] / 2, cur)
                ltr.append(left + width_of[v] / 2)
                cur = left + width_of[v] + gap
            rtl, nxt = [0.0] * len(row), float("inf")
            for i in range(len(row) - 1, -1, -1):
                v = row[i]
                right = min(want[i] + width_of[v] / 2, nxt)
                rtl[i] = right - width_of[v] / 2
                nxt = right - width_of[v] - gap
            placed = [(a_ + b_) / 2 for a_, b_ in zip(ltr, rtl)]
            for v, cx in zip(row, placed):
                x[v] = cx
    lo = min((x[v] - width_of[v] / 2 for v in range(total)), default=0.0)
    shift = margin - lo
    for v in range(m):
        boxes[v].layer = layer[v]
        boxes[v].x = x[v] + shift - width_of[v] / 2
        boxes[v].y = margin + layer[v] * layer_gap
    hi = max((x[v] + width_of[v] / 2 + shift for v in range(total)), default=0.0)
    drawn = [(a, b, [(x[d] + shift, margin + lay_of[d] * layer_gap + box_height / 2) for d in mids])
             for a, b, mids in chains]
    return Layout(boxes=boxes, edges=drawn, width=hi + margin, height=margin * 2 + depth * layer_gap,
                  box_of=box_of)


def _inversions(seq: list[float]) -> int:
    """Pairs out of order in ``seq`` (edge crossings between two layers), by merge sort."""
    n = len(seq)
    if n < 24:  # most layers are small: a direct count is cheaper than the recursion
        return sum(1 for i in range(n) for j in range(i + 1, n) if seq[i] > seq[j])
    mid = len(seq) // 2
    left, right = seq[:mid], seq[mid:]
    count = _inversions(left) + _inversions(right)
    left.sort()
    right.sort()
    i = j = 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            i += 1
        else:
            count += len(left) - i
            j += 1
    return count
