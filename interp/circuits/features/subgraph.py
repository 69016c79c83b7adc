"""Subgraphs that travel: pinned nodes and named supernodes, as Neuronpedia's graph files hold them.

A :class:`Subgraph` is what a reader picks out of a graph: the nodes pinned, and supernodes, each a name and
the nodes it groups. It is saved in the graph file's ``qParams`` as Neuronpedia and circuit-tracer's
frontend write it (``pinnedIds``: node ids; ``supernodes``: ``[name, node_id, node_id, ...]``), so both
frontends draw it, and again with interp's own node names in the file's ``interp`` extension
(:mod:`~interp.circuits.features.extension`), which stays exact where two Neuronpedia ids coincide. Every
member of a supernode is pinned (the frontends group pinned nodes).

Reading accepts either naming: interp's node names (``L3.F417@5``) or Neuronpedia ids (``3_417_5``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.analysis.node import Node


@dataclass(frozen=True)
class Subgraph:
    """Pinned nodes and supernodes of a graph, by interp's node names.

    Attributes:
        pinned: the pinned nodes, in order (every supernode's members among them).
        supernodes: ``(name, members)`` pairs, in order.
    """

    pinned: tuple[str, ...] = ()
    supernodes: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"pinned": [...], "supernodes": [[name, node, ...], ...]}`` by interp's names."""
        return {"pinned": list(self.pinned), "supernodes": [[n, *m] for n, m in self.supernodes]}

    def q_params(self, ids: Mapping[str, str]) -> dict[str, Any]:
        """``pinnedIds`` and ``supernodes`` of Neuronpedia's ``qParams``, through ``ids`` (name -> node id)."""
        return {
            "pinnedIds": [ids[n] for n in self.pinned],
            "supernodes": [[name, *(ids[m] for m in members)] for name, members in self.supernodes],
        }

    @property
    def members(self) -> dict[str, str]:
        """node -> the name of the supernode holding it."""
        return {m: name for name, members in self.supernodes for m in members}


def make_subgraph(
    graph: Any,
    pinned: Iterable[str] = (),
    supernodes: Mapping[str, Sequence[str]] | Sequence[Sequence[str]] = (),
    ids: Mapping[str, list[str]] | None = None,
) -> Subgraph:
    """A checked :class:`Subgraph` of ``graph``: every node named is one of the graph's (interp's name or a
    Neuronpedia id through ``ids``, node id -> names, :func:`id_names`), supernode names are unique and
    non-empty, no node is in two supernodes, and each member is pinned.

    ``supernodes`` is ``{name: members}`` or Neuronpedia's ``[[name, member, ...], ...]``.
    """
    if isinstance(supernodes, Mapping):
        groups = [(str(name), list(members)) for name, members in supernodes.items()]
    else:
        groups = []
        for entry in supernodes:
            if isinstance(entry, str) or len(entry) < 2:
                raise ValueError(f"a supernode is [name, node, ...] with at least one node, got {entry!r}")
            groups.append((str(entry[0]), list(entry[1:])))
    names = [_node(graph, n, ids) for n in pinned]
    seen: dict[str, str] = {}
    out_groups = []
    for name, members in groups:
        if not name.strip():
            raise ValueError(f"a supernode needs a name; got {name!r} for {members}")
        if any(name == g for g, _ in out_groups):
            raise ValueError(f"two supernodes are named {name!r}; give each its own name")
        if not members:
            raise ValueError(f"supernode {name!r} has no nodes")
        resolved = tuple(dict.fromkeys(_node(graph, m, ids) for m in members))
        for m in resolved:
            if m in seen:
                raise ValueError(f"{m} is in supernodes {seen[m]!r} and {name!r}; a node joins one supernode")
            seen[m] = name
        out_groups.append((name, resolved))
    pinned_all = tuple(dict.fromkeys([*names, *seen]))
    return Subgraph(pinned=pinned_all, supernodes=tuple(out_groups))


def _node(graph: Any, name: str, ids: Mapping[str, list[str]] | None) -> str:
    text = str(name)
    if ids is not None and text in ids:
        if len(ids[text]) > 1:
            raise ValueError(
                f"{text!r} is the Neuronpedia id of {' and '.join(ids[text])}; name the node as interp does"
            )
        return ids[text][0]
    try:
        node = Node.parse(text)
    except ValueError:
        hint = " or a Neuronpedia node id of it" if ids is not None else ""
        raise ValueError(
            f"{text!r} is not a node of the graph; name one as interp does ('L3.F417@5'){hint}"
        ) from None
    graph.index(node)  # raises with the graph's size when it lacks the node
    return str(node)


def neuronpedia_ids(graph: Any, vocab: int | None = None) -> dict[str, str]:
    """Every node's Neuronpedia id, by interp's name."""
    from interp.circuits.features.neuronpedia import default_vocab, node_id

    vocab = vocab if vocab is not None else default_vocab(graph)
    return {str(n): node_id(graph, n, vocab) for n in graph.nodes}


def id_names(graph: Any, vocab: int | None = None) -> dict[str, list[str]]:
    """Neuronpedia id -> interp's names: one, but for an error's ``0_{layer}_{pos}``, which is also the id of
    layer 0's feature ``layer`` at that position (such a node must be named as interp names it)."""
    names: dict[str, list[str]] = {}
    for name, nid in neuronpedia_ids(graph, vocab).items():
        names.setdefault(nid, []).append(name)
    return names


def subgraph_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The pinned nodes and supernodes a JSON file holds, by the names it uses: ``{"pinned": [...],
    "supernodes": [...], "own": bool}`` (``own``: interp's names, from a graph file's extension). A graph file's
    extension is read first, then its ``qParams``; an object with ``pinnedIds`` and ``supernodes`` is
    Neuronpedia's ``qParams`` itself. Raises one line on a file that holds neither."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"--subgraph {path} is not a file; pass a JSON file with pinnedIds and supernodes"
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"--subgraph {path} is not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"--subgraph {path} holds a {type(doc).__name__}; expected an object with pinnedIds")
    own = doc.get("interp", {}).get("subgraph") if isinstance(doc.get("interp"), dict) else None
    if own is not None:
        return {"pinned": own.get("pinned", []), "supernodes": own.get("supernodes", []), "own": True}
    params = doc.get("qParams", doc)
    if not isinstance(params, dict) or ("pinnedIds" not in params and "supernodes" not in params):
        raise ValueError(
            f"--subgraph {path} has neither pinnedIds nor supernodes (nor a graph file's qParams)"
        )
    return {"pinned": params.get("pinnedIds", []), "supernodes": params.get("supernodes", []), "own": False}


def read_subgraph(path: str | os.PathLike[str], graph: Any, vocab: int | None = None) -> Subgraph:
    """The subgraph of ``graph`` a JSON file holds (:func:`subgraph_file`), by either naming."""
    found = subgraph_file(path)
    ids = None if found["own"] else id_names(graph, vocab)
    return make_subgraph(graph, found["pinned"], found["supernodes"], ids=ids)
