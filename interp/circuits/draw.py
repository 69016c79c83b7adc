"""Drawing a circuit as a layered graph (matplotlib, offline).

Layers run bottom to top (``input`` at the bottom, ``logits`` at the top; only layers the circuit touches get
a row), heads sit left to right in head order with the layer's MLP on the right (a mixture of experts' experts
in expert order, then its shared expert). An edge ends where it is read:
at the head for a query, at the key/value head's marker below the row for keys and values (a diamond when
several query heads share it), at the MLP or the logits. Colour says which input the edge feeds (query, key,
value, MLP or logits), a dashed line that its score is negative, and the width ``|score|``.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch

from interp.analysis.node import Node
from interp.circuits.circuit import Circuit
from interp.circuits.edge_attribution import EdgeScores

KIND_COLOURS = {"q": "#1f77b4", "k": "#2ca02c", "v": "#ff7f0e", "mlp": "#7f7f7f", "logits": "#9467bd"}
KV_DROP = 0.32  # how far below its layer's row a key/value head's marker sits
EXPERT_STEP = 0.8  # the distance between the experts of a layer, right of its heads


_INPUT_KIND = {"query": "q", "key": "k", "value": "v", "mlp": "mlp", "output": "logits"}


def _kind(input_name: Node) -> str:
    return _INPUT_KIND[input_name.kind]


def draw_circuit(circuit: Circuit, scores: EdgeScores | None = None, *, title: str | None = None) -> Figure:
    """The circuit as a figure; edge widths follow ``scores`` when given (else all edges are drawn alike)."""
    graph = circuit.graph
    layers = sorted({n.layer for n in circuit.nodes if n.layer is not None})
    row = {layer: i + 1 for i, layer in enumerate(layers)}
    top = len(layers) + 1
    centre = (graph.n_heads - 1) / 2
    mlp_x = graph.n_heads + 0.4
    n_experts = max(graph.experts, default=0)
    right = mlp_x + (n_experts - 1 + graph.shared_expert) * EXPERT_STEP if n_experts else mlp_x

    def mlp_node_x(node: Node) -> float:
        if node.kind == "expert":
            return mlp_x + node.expert * EXPERT_STEP
        return mlp_x + n_experts * EXPERT_STEP if node.kind == "shared" else mlp_x

    def node_xy(node: Node) -> tuple[float, float]:
        if node.kind == "input":
            return centre, 0.0
        if node.kind == "output":
            return centre, float(top)
        return (float(node.head) if node.kind == "head" else mlp_node_x(node)), float(row[node.layer])

    def target_xy(node: Node) -> tuple[float, float]:
        if node.kind not in ("key", "value"):
            return node_xy(graph.heads_of(node)[0])
        size = graph.group_size
        x = node.group * size + (size - 1) / 2
        return (x, row[node.layer] - KV_DROP) if size > 1 else (x, float(row[node.layer]))

    edges = circuit.edges
    values = [scores[e] if scores is not None else 1.0 for e in edges]
    biggest = max((abs(v) for v in values), default=1.0) or 1.0
    fig = Figure(figsize=(max(6.0, 0.75 * (right + 2)), max(3.0, 0.62 * (top + 1))))
    ax = fig.add_subplot()
    for (source, target), value in zip(edges, values, strict=True):
        (x0, y0), (x1, y1) = node_xy(source), target_xy(target)
        bend = 0.25 if abs(y1 - y0) < 0.5 else 0.08
        ax.add_patch(
            FancyArrowPatch(
                (x0, y0),
                (x1, y1),
                arrowstyle="-|>",
                mutation_scale=7,
                connectionstyle=f"arc3,rad={bend}",
                color=KIND_COLOURS[_kind(target)],
                linewidth=0.4 + 3.6 * abs(value) / biggest,
                linestyle="--" if value < 0 else "-",
                alpha=0.2 + 0.7 * abs(value) / biggest,
                zorder=1,
            )
        )
    for name in circuit.nodes:
        x, y = node_xy(name)
        marker = {"mlp": "s", "expert": "s", "shared": "s", "head": "o"}.get(name.kind, "D")
        ax.scatter([x], [y], s=260, marker=marker, color="white", edgecolor="black", zorder=3)
        label = name.split(".", 1)[1] if name.layer is not None else name
        ax.annotate(label, (x, y), ha="center", va="center", fontsize=6, zorder=4)
    if graph.group_size > 1:
        groups = {(e[1].layer, e[1].group) for e in edges if e[1].kind in ("key", "value")}
        for layer, g in sorted(groups):
            x, y = target_xy(Node.key(layer, g))
            ax.scatter([x], [y], s=40, marker="D", color="#dddddd", edgecolor="black", zorder=3)
    ax.set_yticks([0, *row.values(), top], ["input", *(f"L{layer}" for layer in layers), "logits"])
    ax.set_xticks(range(graph.n_heads), [f"H{h}" for h in range(graph.n_heads)], fontsize=7)
    ax.set_xlim(-0.8, right + 0.8)
    ax.set_ylim(-0.6, top + 0.6)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    legend = [Line2D([], [], color=c, label=k) for k, c in KIND_COLOURS.items()]
    legend.append(Line2D([], [], color="black", linestyle="--", label="negative score"))
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    ax.set_title(title or f"{circuit.n_edges} edges, {len(circuit.nodes)} nodes", fontsize=9)
    return fig
