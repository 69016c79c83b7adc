"""Subgraphs that travel: pinned nodes and named supernodes, as Neuronpedia's graph files hold them.

A :class:`Subgraph` is what a reader picks out of a graph: the nodes pinned, and supernodes, each a name and
the nodes it groups. It is saved in the graph file's ``qParams`` as Neuronpedia and circuit-tracer's
frontend write it (``pinnedIds``: node ids; ``supernodes``: ``[name, node_id, node_id, ...]``), so both
frontends draw it, and again with interp's own node names in the file's ``interp`` extension
(:mod:`~interp.circuits.features.extension`), which stays exact where two Neuronpedia ids coincide. Every
member of a supernode is pinned (the frontends group pinned nodes).

Reading accepts either naming: interp's node names (``L3.F417@5``) or Neuronpedia ids (``3_417_5``). A file is
checked through when it is read (:func:`subgraph_file`: every field's type and every name's form, the
supernodes' names and members), and its nodes when they are resolved against a graph
(:meth:`SubgraphFile.resolve`), or, before attribution, against the nodes the prompt's graph will have
(:mod:`~interp.circuits.features.pins`); every refusal names the file and the field.
"""

from __future__ import annotations

import json
import os
import re
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
    if ids is not None and _NEURONPEDIA_ID.fullmatch(text):
        raise ValueError(_missing_id(graph, text))
    try:
        node = Node.parse(text)
    except ValueError:
        hint = " or a Neuronpedia node id of it" if ids is not None else ""
        raise ValueError(
            f"{text!r} is not a node of the graph; name one as interp does ('L3.F417@5'){hint}"
        ) from None
    graph.index(node)  # raises with the graph's size (or why it lacks the node) when it lacks the node
    return str(node)


_NEURONPEDIA_ID = re.compile(r"(?P<layer>E|\d+)_(?P<index>\d+)_(?P<position>\d+)")
"""A node id as Neuronpedia forms one (:func:`~interp.circuits.features.neuronpedia.node_id`)."""


def _missing_id(graph: Any, text: str) -> str:
    """Why the Neuronpedia id ``text`` names no node of ``graph``: the nodes its form can name, and why each is
    not there."""
    m = _NEURONPEDIA_ID.fullmatch(text)
    layer, index, position = m["layer"], int(m["index"]), int(m["position"])
    if layer == "E":
        if position < graph.n_pos:
            return (
                f"{text!r} is the Neuronpedia id of token {index} at position {position}, but the prompt has "
                f"token {int(graph.input_tokens[position])} there (id E_{int(graph.input_tokens[position])}_"
                f"{position})"
            )
        return f"{text!r} is a token at position {position}, past the prompt's {graph.n_pos} tokens"
    layer = int(layer)
    if layer == graph.n_layers + 1:
        return (
            f"{text!r} is the Neuronpedia id of a logit target {index} at position {position}; the graph's "
            f"targets are {[int(t) for t in graph.logit_tokens]} at position {graph.n_pos - 1}"
        )
    if layer > graph.n_layers:
        return f"{text!r} names layer {layer}; the model has {graph.n_layers} layers"
    reasons = []
    for node in ([Node.error(index, position)] if layer == 0 and index < graph.n_layers else []) + (
        [Node.feature_node(layer, position, index)] if layer < graph.n_layers else []
    ):
        try:
            graph.index(node)
        except KeyError as err:
            reasons.append(str(err.args[0]))
    return f"{text!r} is the Neuronpedia id of no node of the graph: {'; '.join(reasons)}"


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


@dataclass(frozen=True)
class SubgraphFile:
    """What a subgraph file holds, checked through: pinned nodes and supernodes by the names it uses, and where
    they sit in the file, so that a node a graph lacks is named by file and field.

    Attributes:
        path: the file.
        pinned: the pinned nodes' names.
        supernodes: ``(name, members)`` pairs.
        own: the names are interp's (a graph file's extension) rather than Neuronpedia ids.
        fields: where ``pinned`` and ``supernodes`` sit in the file (``qParams.pinnedIds``, ...).
    """

    path: Path
    pinned: tuple[str, ...]
    supernodes: tuple[tuple[str, tuple[str, ...]], ...]
    own: bool
    fields: tuple[str, str]

    def resolve(self, graph: Any, vocab: int | None = None) -> Subgraph:
        """The :class:`Subgraph` of ``graph`` the file names (by interp's names or Neuronpedia ids).

        Raises:
            ValueError: one line naming the file, the field and the node the graph lacks (and why), or an id
                two nodes share.
        """
        ids = None if self.own else id_names(graph, vocab)
        pins = [self._node(graph, text, ids, f"{self.fields[0]}[{i}]") for i, text in enumerate(self.pinned)]
        groups = [
            [
                name,
                *(
                    self._node(graph, m, ids, f"{self.fields[1]}[{i}][{j + 1}]")
                    for j, m in enumerate(members)
                ),
            ]
            for i, (name, members) in enumerate(self.supernodes)
        ]
        try:
            return make_subgraph(graph, pins, groups)
        except (KeyError, ValueError) as err:
            raise ValueError(f"--subgraph {self.path}: {_message(err)}") from None

    def _node(self, graph: Any, text: str, ids: Mapping[str, list[str]] | None, field: str) -> str:
        try:
            return _node(graph, text, ids)
        except (KeyError, ValueError) as err:
            raise ValueError(f"--subgraph {self.path}: {field}: {_message(err)}") from None


def _message(err: BaseException) -> str:
    return str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)


def subgraph_file(path: str | os.PathLike[str]) -> SubgraphFile:
    """The pinned nodes and supernodes a JSON file holds, checked through before any work: a graph file's
    extension (interp's names) is read first, then its ``qParams``; an object with ``pinnedIds`` and
    ``supernodes`` is Neuronpedia's ``qParams`` itself. A graph file its folder's record does not list (a save
    stopped part way) is refused (:func:`~interp.circuits.features.graph_folder.check_generation`).

    Raises:
        FileNotFoundError: no file there. ValueError: one line naming the file, the field and what would be
            right: not JSON, not an object, neither field, a field of the wrong type, a node name of the wrong
            form, a supernode without a name or without nodes, two supernodes of one name or sharing a node.
    """
    from interp.circuits.features.graph_folder import check_generation

    path = Path(path).expanduser()
    where = f"--subgraph {path}"
    if not path.is_file():
        raise FileNotFoundError(f"{where} is not a file; pass a JSON file with pinnedIds and supernodes")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{where} is not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{where} holds a {_kind(doc)}; expected an object with pinnedIds")
    extension = doc.get("interp")
    if extension is not None and not isinstance(extension, dict):
        raise ValueError(
            f"{where}: interp is a {_kind(extension)}; it must be an object (interp's extension)"
        )
    if isinstance(extension, dict):
        check_generation(path, extension.get("generation"))
        if extension.get("subgraph") is not None:
            own = extension["subgraph"]
            fields = ("interp.subgraph.pinned", "interp.subgraph.supernodes")
            if not isinstance(own, dict):
                raise ValueError(
                    f'{where}: interp.subgraph is a {_kind(own)}; it must be an object {{"pinned": [...], '
                    '"supernodes": [...]}}'
                )
            return _checked(path, own.get("pinned", []), own.get("supernodes", []), fields, own=True)
    params, at = (doc["qParams"], "qParams.") if "qParams" in doc else (doc, "")
    if not isinstance(params, dict):
        raise ValueError(f"{where}: qParams is a {_kind(params)}; it must be an object with pinnedIds")
    if "pinnedIds" not in params and "supernodes" not in params:
        raise ValueError(f"{where} has neither pinnedIds nor supernodes (nor a graph file's qParams)")
    fields = (f"{at}pinnedIds", f"{at}supernodes")
    return _checked(path, params.get("pinnedIds", []), params.get("supernodes", []), fields, own=False)


def _checked(path: Path, pinned: Any, supernodes: Any, fields: tuple[str, str], *, own: bool) -> SubgraphFile:
    """A :class:`SubgraphFile` of ``pinned`` and ``supernodes`` as read, once every field has the right type and
    form and the supernodes are well made."""
    where = f"--subgraph {path}"
    example = (
        '"L3.F417@5" (interp\'s name)'
        if own
        else '"3_417_5" (a Neuronpedia id) or "L3.F417@5" (interp\'s name)'
    )
    if not isinstance(pinned, list):
        raise ValueError(
            f"{where}: {fields[0]} is {_shown(pinned)}; it must be a list of nodes, each such as {example}"
        )
    if not isinstance(supernodes, list):
        raise ValueError(
            f"{where}: {fields[1]} is {_shown(supernodes)}; it must be a list of [name, node, ...] lists"
        )
    for i, text in enumerate(pinned):
        _check_name(where, f"{fields[0]}[{i}]", text, own, example)
    groups: list[tuple[str, tuple[str, ...]]] = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(supernodes):
        field = f"{fields[1]}[{i}]"
        if not isinstance(entry, list) or len(entry) < 2:
            raise ValueError(
                f"{where}: {field} is {_shown(entry)}; a supernode is [name, node, ...] with at least one node"
            )
        name, members = entry[0], entry[1:]
        if not isinstance(name, str) or not name.strip():
            raise ValueError(
                f"{where}: {field}[0] is {_shown(name)}; a supernode's name is a text that is not empty"
            )
        if any(name == g for g, _ in groups):
            raise ValueError(f"{where}: {field}: two supernodes are named {name!r}; give each its own name")
        for j, text in enumerate(members):
            _check_name(where, f"{field}[{j + 1}]", text, own, example)
            if seen.get(text, name) != name:
                raise ValueError(
                    f"{where}: {field}[{j + 1}]: {text} is in supernodes {seen[text]!r} and {name!r}; a node joins "
                    "one supernode"
                )
            seen[text] = name
        groups.append((name, tuple(members)))
    return SubgraphFile(path, tuple(pinned), tuple(groups), own, fields)


def _check_name(where: str, field: str, text: Any, own: bool, example: str) -> None:
    """Raise unless ``text`` is a name of a graph's node: interp's, or (unless ``own``) a Neuronpedia id."""
    if not isinstance(text, str):
        raise ValueError(f"{where}: {field} is {_shown(text)}; a node is named by a text such as {example}")
    if not own and _NEURONPEDIA_ID.fullmatch(text):
        return
    try:
        kind = Node.parse(text).kind
    except ValueError:
        kind = None
    if kind not in ("feature", "error", "token", "logit") or (kind == "token" and "@" not in text):
        raise ValueError(
            f"{where}: {field} is {text!r}, which names no node of a graph; name one such as {example}"
        )


def _kind(value: Any) -> str:
    return {list: "list", dict: "object", str: "text", type(None): "null", bool: "boolean"}.get(
        type(value), "number" if isinstance(value, int | float) else type(value).__name__
    )


def _shown(value: Any) -> str:
    """``value`` for a message: its JSON form when short, else its kind."""
    text = json.dumps(value)
    return text if len(text) <= 40 else f"a {_kind(value)}"


def read_subgraph(path: str | os.PathLike[str], graph: Any, vocab: int | None = None) -> Subgraph:
    """The subgraph of ``graph`` a JSON file holds (:func:`subgraph_file`), by either naming."""
    return subgraph_file(path).resolve(graph, vocab)
