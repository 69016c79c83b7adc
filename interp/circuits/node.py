"""Circuit nodes as values: one small type for every node and node input a graph can have.

A :class:`Node` is a string (so it prints, sorts, compares with a plain name and goes into JSON unchanged) that
carries its parts: ``kind``, ``layer``, ``head``, ``group``, ``position``, ``feature`` and ``target``. Code reasons
about the parts; the text is formatted once, by the constructors, and parsed once, by :meth:`Node.parse`, at the
edge (a file, a command-line flag, a name a user typed). Nothing else in the package matches node names.

The vocabulary, shared by the component graph (:mod:`~interp.circuits.graph`) and attribution graphs
(:mod:`~interp.circuits.features`):

=============  ======================  ===========================================================
kind           text                    what
=============  ======================  ===========================================================
``input``      ``input``               the stream entering block 0 (component graph)
``head``       ``L3.H2``               an attention head's write
``mlp``        ``L3.MLP``              an MLP's write, and the MLP's input
``logits``     ``logits``              the output (component graph)
``query``      ``L3.H2.q``             a head's query input
``key``        ``L3.KV1.k``            the key input of key/value head 1
``value``      ``L3.KV1.v``            the value input of key/value head 1
``feature``    ``L3.F417@5``           transcoder feature 417 of layer 3 at position 5
``error``      ``L3.error@5``          what layer 3's transcoder misses at position 5
``token``      ``token@5``             the embedding of the token at position 5
``logit``      ``logit.0``             attribution target 0 (a token's de-meaned logit or a direction)
=============  ======================  ===========================================================

>>> n = Node.parse("L3.KV1.k")
>>> n.kind, n.layer, n.group, n == "L3.KV1.k"
('key', 3, 1, True)
>>> f = Node.feature_node(3, 5, 417)
>>> f, f.position
('L3.F417@5', 5)
"""

from __future__ import annotations

import re
from typing import Any, Literal

Kind = Literal[
    "input", "head", "mlp", "logits", "query", "key", "value", "feature", "error", "token", "logit"
]
_FIELDS = ("layer", "head", "group", "position", "feature", "target")

# the one pattern: every name a Node formats, and nothing else
_PATTERN = re.compile(
    r"(?P<input>input)|(?P<logits>logits)|token@(?P<token_pos>\d+)|logit\.(?P<logit>\d+)"
    r"|L(?P<layer>\d+)\.(?:MLP(?P<mlp>)|H(?P<head>\d+)(?P<q>\.q)?|KV(?P<group>\d+)\.(?P<kv>[kv])"
    r"|F(?P<feature>\d+)@(?P<feature_pos>\d+)|error@(?P<error_pos>\d+))"
)


class Node(str):
    """A node of a circuit or attribution graph (see the module docstring); equal to its text.

    Build one with the constructors (:meth:`head`, :meth:`feature`, ...) or :meth:`parse`; fields a kind does
    not have are ``None``. Instances are immutable.
    """

    kind: Kind
    layer: int | None
    head: int | None
    group: int | None
    position: int | None
    feature: int | None
    target: int | None

    def __new__(cls, text: str, kind: Kind | None = None, **fields: int | None) -> Node:
        if kind is None:
            return cls.parse(text)
        node = super().__new__(cls, text)
        object.__setattr__(node, "kind", kind)
        for name in _FIELDS:
            object.__setattr__(node, name, fields.get(name))
        return node

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Node is immutable; cannot set {name!r} on {str(self)!r}")

    def __getnewargs__(self) -> tuple[str]:
        return (str(self),)

    def __repr__(self) -> str:
        return repr(str(self))

    # -- constructors: the only places that format a node's text ----------------------------------------

    @classmethod
    def input(cls) -> Node:
        return cls("input", "input")

    @classmethod
    def logits(cls) -> Node:
        return cls("logits", "logits")

    @classmethod
    def head_node(cls, layer: int, head: int) -> Node:
        return cls(f"L{layer}.H{head}", "head", layer=layer, head=head)

    @classmethod
    def mlp(cls, layer: int) -> Node:
        return cls(f"L{layer}.MLP", "mlp", layer=layer)

    @classmethod
    def query(cls, layer: int, head: int) -> Node:
        return cls(f"L{layer}.H{head}.q", "query", layer=layer, head=head)

    @classmethod
    def key(cls, layer: int, group: int) -> Node:
        return cls(f"L{layer}.KV{group}.k", "key", layer=layer, group=group)

    @classmethod
    def value(cls, layer: int, group: int) -> Node:
        return cls(f"L{layer}.KV{group}.v", "value", layer=layer, group=group)

    @classmethod
    def feature_node(cls, layer: int, position: int, feature: int) -> Node:
        return cls(
            f"L{layer}.F{feature}@{position}", "feature", layer=layer, position=position, feature=feature
        )

    @classmethod
    def error(cls, layer: int, position: int) -> Node:
        return cls(f"L{layer}.error@{position}", "error", layer=layer, position=position)

    @classmethod
    def token(cls, position: int) -> Node:
        return cls(f"token@{position}", "token", position=position)

    @classmethod
    def logit(cls, target: int) -> Node:
        return cls(f"logit.{target}", "logit", target=target)

    # -- parsing: the only place that reads a node's text -----------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Node:
        """The node ``text`` names; raises ``ValueError`` on text that names no node."""
        if isinstance(text, Node):
            return text
        m = _PATTERN.fullmatch(str(text))
        if m is None:
            raise ValueError(
                f"{text!r} names no node; nodes are 'input', 'logits', 'L3.H2', 'L3.MLP', 'L3.H2.q', 'L3.KV1.k', "
                "'L3.KV1.v', 'L3.F417@5', 'L3.error@5', 'token@5' and 'logit.0'"
            )
        g = {k: (int(v) if v and v.isdigit() else v) for k, v in m.groupdict().items()}
        if g["input"]:
            return cls.input()
        if g["logits"]:
            return cls.logits()
        if g["token_pos"] is not None:
            return cls.token(g["token_pos"])
        if g["logit"] is not None:
            return cls.logit(g["logit"])
        layer = g["layer"]
        if g["mlp"] is not None:
            return cls.mlp(layer)
        if g["head"] is not None:
            return cls.query(layer, g["head"]) if g["q"] else cls.head_node(layer, g["head"])
        if g["group"] is not None:
            return (cls.key if g["kv"] == "k" else cls.value)(layer, g["group"])
        if g["feature"] is not None:
            return cls.feature_node(layer, g["feature_pos"], g["feature"])
        return cls.error(layer, g["error_pos"])
