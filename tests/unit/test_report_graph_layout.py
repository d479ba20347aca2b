"""report/graph_layout.py: the layered (Sugiyama) drawing of the HTML report's graphs."""

from __future__ import annotations

import random

from pytest_npucheck.report.graph_layout import _inversions, layout


def unet_edges(depth: int = 3) -> tuple[int, list[tuple[int, int]]]:
    """A chain down and up with a skip connection from each encoder level to its decoder level."""
    n = 4 * depth + 2
    edges = [(k, k + 1) for k in range(n - 1)]
    edges += [(2 * k + 1, n - 2 - 2 * k) for k in range(depth)]
    return n, edges


def overlaps(lay) -> bool:
    rows: dict[int, list[tuple[float, float]]] = {}
    for b in lay.boxes:
        rows.setdefault(b.layer, []).append((b.x, b.x + 150))
    for spans in rows.values():
        spans.sort()
        if any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
            return True
    return False


def test_every_edge_points_down_and_long_edges_route_through_dummies_beside_the_column():
    n, edges = unet_edges()
    lay = layout(n, edges, lambda v: 150)
    layer = {v: lay.boxes[lay.box_of[v]].layer for v in range(n)}
    assert all(layer[b] > layer[a] for a, b in edges)
    assert not overlaps(lay)
    skips = [(a, b, pts) for a, b, pts in lay.edges if layer[b] - layer[a] > 1]
    assert len(skips) == 3 and all(len(pts) == layer[b] - layer[a] - 1 for a, b, pts in skips)
    # a skip connection is not drawn over the boxes it passes: its dummies sit beside them
    for a, b, pts in skips:
        for x, y in pts:
            row = [bx for bx in lay.boxes if abs(bx.y + 17 - y) < 1]
            assert all(not (bx.x <= x <= bx.x + 150) for bx in row)


def test_barycentre_ordering_removes_the_crossings_of_a_crossed_bipartite_graph():
    # two layers of four nodes, wired in reverse: the input order crosses every pair
    edges = [(0, 7), (1, 6), (2, 5), (3, 4)]
    lay = layout(8, edges, lambda v: 150)
    top = sorted(range(4), key=lambda v: lay.boxes[v].x)
    bottom = {b: lay.boxes[b].x for a, b in edges}
    xs = [bottom[dict(edges)[a]] for a in top]
    assert xs == sorted(xs)  # no two edges cross
    assert _inversions([3, 2, 1, 0]) == 6 and _inversions([0, 1, 2]) == 0


def test_long_runs_of_collapsible_nodes_become_one_box():
    n = 30
    edges = [(k, k + 1) for k in range(n - 1)] + [(10, 12)]  # a branch at 10 splits the chain
    lay = layout(n, edges, lambda v: 150, collapsible=lambda v: v != 20, min_run=5)
    runs = [b.members for b in lay.boxes if b.collapsed]
    # 0 (no producer), 10 (two consumers), 11 (too short a run), 12 (two producers), 20 (not collapsible)
    # and 29 (no consumer) stay boxes of their own
    assert runs == [list(range(1, 10)), list(range(13, 20)), list(range(21, 29))]
    assert sum(len(b.members) for b in lay.boxes) == n


def test_a_5000_node_graph_is_laid_out_without_overlaps():
    rng = random.Random(3)
    n = 5000
    edges = [(k, k + 1) for k in range(n - 1)] + [(k, min(n - 1, k + rng.randint(2, 40))) for k in range(0, n, 9)]
    lay = layout(n, edges, lambda v: 150, collapsible=lambda v: v % 37 != 0)
    assert not overlaps(lay)
    layer = {v: lay.boxes[lay.box_of[v]].layer for v in range(n)}
    assert all(layer[b] > layer[a] for a, b in edges if lay.box_of[a] != lay.box_of[b])
