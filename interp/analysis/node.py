"""Nodes as values: one small type names every part of the residual stream and every node of a graph.

A :class:`Node` is a string (so it prints, sorts, compares with a plain name and goes into JSON unchanged) that
carries its parts: ``kind``, ``layer``, ``head``, ``group``, ``position``, ``source``, ``feature``, ``target``,
``expert`` and ``name``. Code reasons about the parts; the text is formatted once, by the constructors, and parsed
once, by :meth:`Node.parse`, at the edge (a file, a command-line flag, a name a user typed). Nothing else in the
package matches node names.

The same values name the components of a decomposed stream (:mod:`interp.analysis.decompose`, QK attribution),
the component graph's nodes and node inputs (:mod:`interp.circuits.graph`) and an attribution graph's nodes
(:mod:`interp.circuits.features`): a feature, an error or a token embedding is one node wherever it appears.
Where a write is taken at one position the node carries it (``L3.H2@5``); over the whole stream it does not
(``L3.H2``).

=============  ==============================  =======================  ===========================================
kind           text                            label                    what
=============  ==============================  =======================  ===========================================
``input``      ``input``                       ``input``                the stream entering block 0 (component graph)
``output``     ``logits``                      ``logits``               the logits the component graph ends in
``head``       ``L3.H2``, ``L3.H2@5``,         ``L3H2@"it"``            an attention head's write (at position 5;
               ``L3.H2@5<-1``                                           the part it carried from key 1)
``attn_bias``  ``L3.b_O``                      ``L3 b_O``               layer 3's attention output bias
``mlp``        ``L3.MLP``, ``L3.MLP@5``        ``MLP3@"it"``            an MLP's write, and the MLP's input (a
                                                                        mixture of experts' too)
``expert``     ``L3.E5``                       ``L3E5``                 routed expert 5's write (its weighted
                                                                        output at its tokens)
``shared``     ``L3.SE``                       ``L3SE``                 the shared expert's write (Qwen2-MoE),
                                                                        gate included
``query``      ``L3.H2.q``                     ``L3.H2.q``              a head's query input
``key``        ``L3.KV1.k``                    ``L3.KV1.k``             the key input of key/value head 1
``value``      ``L3.KV1.v``                    ``L3.KV1.v``             the value input of key/value head 1
``feature``    ``L3.F417@5``                   ``feature 3/417@"it"``   transcoder feature 417 of layer 3 at
                                                                        position 5 (its layer is the one it reads)
``error``      ``L3.error@5``                  ``MLP3 error@"it"``      what layer 3's transcoder misses at 5
``tc_bias``    ``L3.b_dec``                    ``MLP3 b_dec``           the transcoders' decoder bias into layer 3
``skip``       ``L3.skip@5``                   ``MLP3 skip@"it"``       layer 3's transcoder skip term at 5
``token``      ``token``, ``token@5``          ``embed@"it"``           the token embedding (at position 5)
``pos_embed``  ``pos``, ``pos@5``              ``pos@"it"``             the position embedding (at position 5)
``bias``       ``L3.ln1.b``, ``embed_ln.b``,   ``L3 ln1.b``, ``b_Q``    a norm's bias, or one met on the way into a
               ``b_Q``                                                  head's query or key (no layer: the head's)
``logit``      ``logit.0``                     ``logit.0``              attribution target 0 (a token's de-meaned
                                                                        logit or a direction)
``rest``       ``bias``                        ``bias``                 what no node of an attribution graph writes
                                                                        (biases, position embeddings, pruned
                                                                        features...; graph files call it ``bias``)
=============  ==============================  =======================  ===========================================

The label is for people: it shows the token a node was written at (a head's part from one key shows that
key's token), which the node carries as :attr:`Node.shown` but which is not part of its name: two nodes with
the same text are equal whatever they show.

>>> n = Node.parse("L3.KV1.k")
>>> n.kind, n.layer, n.group, n == "L3.KV1.k"
('key', 3, 1, True)
>>> f = Node.feature_node(3, 5, 417)
>>> f, f.position
('L3.F417@5', 5)
>>> h = Node.head_node(3, 4, position=8, source=2, shown=" tired")
>>> h, h.label, Node.parse(h).source
('L3.H4@8<-2', 'L3H4@" tired"', 2)
"""

from __future__ import annotations

import re
from typing import Any, Literal

Kind = Literal[
    "input",
    "output",
    "head",
    "attn_bias",
    "mlp",
    "expert",
    "shared",
    "query",
    "key",
    "value",
    "feature",
    "error",
    "tc_bias",
    "skip",
    "token",
    "pos_embed",
    "bias",
    "logit",
    "rest",
]
_FIELDS = ("layer", "head", "group", "position", "source", "feature", "target", "expert", "name")

# the one pattern: every name a Node formats, and nothing else
_PATTERN = re.compile(
    r"(?P<input>input)|(?P<output>logits)|logit\.(?P<logit>\d+)|(?P<rest>bias)"
    r"|(?P<token>token)(?:@(?P<token_pos>\d+))?|(?P<pos>pos)(?:@(?P<pos_pos>\d+))?"
    r"|(?:L(?P<bias_layer>\d+)\.)?(?P<bias>\w+\.b|b_[QK])"
    r"|L(?P<layer>\d+)\.(?:MLP(?:@(?P<mlp_pos>\d+))?|E(?P<expert>\d+)|(?P<shared>SE)"
    r"|H(?P<head>\d+)(?:(?P<q>\.q)|@(?P<head_pos>\d+)(?:<-(?P<source>\d+))?)?"
    r"|KV(?P<group>\d+)\.(?P<kv>[kv])|F(?P<feature>\d+)@(?P<feature_pos>\d+)|error@(?P<error_pos>\d+)"
    r"|skip@(?P<skip_pos>\d+)|(?P<b_O>b_O)|(?P<b_dec>b_dec))"
)


def _at(position: int | None) -> str:
    return "" if position is None else f"@{position}"


class Node(str):
    """A node of a graph or a part of the stream (see the module docstring); equal to its text.

    Build one with the constructors (:meth:`head_node`, :meth:`feature_node`, ...) or :meth:`parse`; fields a
    kind does not have are ``None``. Instances are immutable.

    Attributes:
        kind: what the node is (the module docstring's table).
        layer: the writing or reading layer (for a feature: the layer that reads it).
        head: the query head (``head``, ``query``).
        group: the key/value head (``key``, ``value``).
        position: the position written or read, where the node is taken at one.
        source: for a head's write split by key, the key position it read.
        feature: the feature index.
        target: the attribution target's index (``logit``).
        expert: the routed expert (``expert``).
        name: a bias's name (``ln1.b``, ``b_Q``...).
        shown: the token :attr:`label` shows (not part of the name).
    """

    kind: Kind
    layer: int | None
    head: int | None
    group: int | None
    position: int | None
    source: int | None
    feature: int | None
    target: int | None
    expert: int | None
    name: str | None
    shown: str

    def __new__(cls, text: str, kind: Kind | None = None, *, shown: str = "", **fields: Any) -> Node:
        if kind is None:
            return cls.parse(text)
        node = super().__new__(cls, text)
        object.__setattr__(node, "kind", kind)
        for name in _FIELDS:
            object.__setattr__(node, name, fields.get(name))
        object.__setattr__(node, "shown", shown)
        return node

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Node is immutable; cannot set {name!r} on {str(self)!r}")

    def __getnewargs__(self) -> tuple[str]:
        return (str(self),)

    def __repr__(self) -> str:
        return repr(str(self))

    def showing(self, shown: str) -> Node:
        """This node with another token for its :attr:`label` to show."""
        fields = {name: getattr(self, name) for name in _FIELDS}
        return type(self)(str(self), self.kind, shown=shown, **fields)

    @property
    def label(self) -> str:
        """The node for people: ``L3H4@" tired"``, ``MLP7@" it"``, ``feature 3/417``, ``L2 b_O``..."""
        at = f"@{self.shown!r}".replace("'", '"') if self.shown else ""
        kind, layer = self.kind, self.layer
        labels = {
            "token": f"embed{at}",
            "pos_embed": f"pos{at}",
            "head": f"L{layer}H{self.head}{at}",
            "attn_bias": f"L{layer} b_O",
            "mlp": f"MLP{layer}{at}",
            "expert": f"L{layer}E{self.expert}",
            "shared": f"L{layer}SE",
            "feature": f"feature {layer}/{self.feature}{at}",
            "error": f"MLP{layer} error{at}",
            "tc_bias": f"MLP{layer} b_dec",
            "skip": f"MLP{layer} skip{at}",
            "bias": self.name if layer is None else f"L{layer} {self.name}",
        }
        return labels.get(kind, str(self))

    # -- constructors: the only places that format a node's text ----------------------------------------

    @classmethod
    def input(cls) -> Node:
        return cls("input", "input")

    @classmethod
    def output(cls) -> Node:
        return cls("logits", "output")

    @classmethod
    def head_node(
        cls, layer: int, head: int, position: int | None = None, source: int | None = None, *, shown: str = ""
    ) -> Node:
        if source is not None and position is None:
            raise ValueError(f"a head's part from key {source} needs the position it was written at")
        text = f"L{layer}.H{head}{_at(position)}" + ("" if source is None else f"<-{source}")
        return cls(text, "head", layer=layer, head=head, position=position, source=source, shown=shown)

    @classmethod
    def attn_bias(cls, layer: int) -> Node:
        return cls(f"L{layer}.b_O", "attn_bias", layer=layer)

    @classmethod
    def mlp(cls, layer: int, position: int | None = None, *, shown: str = "") -> Node:
        return cls(f"L{layer}.MLP{_at(position)}", "mlp", layer=layer, position=position, shown=shown)

    @classmethod
    def expert_node(cls, layer: int, expert: int) -> Node:
        return cls(f"L{layer}.E{expert}", "expert", layer=layer, expert=expert)

    @classmethod
    def shared_expert(cls, layer: int) -> Node:
        return cls(f"L{layer}.SE", "shared", layer=layer)

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
    def feature_node(cls, layer: int, position: int, feature: int, *, shown: str = "") -> Node:
        return cls(
            f"L{layer}.F{feature}@{position}",
            "feature",
            layer=layer,
            position=position,
            feature=feature,
            shown=shown,
        )

    @classmethod
    def error(cls, layer: int, position: int, *, shown: str = "") -> Node:
        return cls(f"L{layer}.error@{position}", "error", layer=layer, position=position, shown=shown)

    @classmethod
    def decoder_bias(cls, layer: int) -> Node:
        return cls(f"L{layer}.b_dec", "tc_bias", layer=layer)

    @classmethod
    def skip(cls, layer: int, position: int, *, shown: str = "") -> Node:
        return cls(f"L{layer}.skip@{position}", "skip", layer=layer, position=position, shown=shown)

    @classmethod
    def token(cls, position: int | None = None, *, shown: str = "") -> Node:
        return cls(f"token{_at(position)}", "token", position=position, shown=shown)

    @classmethod
    def pos_embed(cls, position: int | None = None, *, shown: str = "") -> Node:
        return cls(f"pos{_at(position)}", "pos_embed", position=position, shown=shown)

    @classmethod
    def bias(cls, name: str, layer: int | None = None) -> Node:
        if not re.fullmatch(r"\w+\.b|b_[QK]", name):
            raise ValueError(
                f"bias name {name!r}; expected a norm's 'NORM.b' (such as 'ln1.b'), 'b_Q' or 'b_K'"
            )
        return cls(name if layer is None else f"L{layer}.{name}", "bias", layer=layer, name=name)

    @classmethod
    def logit(cls, target: int) -> Node:
        return cls(f"logit.{target}", "logit", target=target)

    @classmethod
    def rest(cls) -> Node:
        return cls("bias", "rest")

    # -- parsing: the only place that reads a node's text -----------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Node:
        """The node ``text`` names; raises ``ValueError`` on text that names no node."""
        if isinstance(text, Node):
            return text
        m = _PATTERN.fullmatch(str(text))
        if m is None:
            raise ValueError(
                f"{text!r} names no node; nodes are 'input', 'logits', 'L3.H2' ('L3.H2@5', 'L3.H2@5<-1'), "
                "'L3.b_O', 'L3.MLP' ('L3.MLP@5'), 'L3.E5', 'L3.SE', 'L3.H2.q', 'L3.KV1.k', 'L3.KV1.v', 'L3.F417@5', "
                "'L3.error@5', 'L3.b_dec', 'L3.skip@5', 'token' ('token@5'), 'pos' ('pos@5'), 'L3.ln1.b', "
                "'b_Q', 'logit.0' and 'bias'"
            )
        g = {k: (int(v) if v and v.isdigit() else v) for k, v in m.groupdict().items()}
        if g["input"]:
            return cls.input()
        if g["output"]:
            return cls.output()
        if g["logit"] is not None:
            return cls.logit(g["logit"])
        if g["rest"]:
            return cls.rest()
        if g["token"]:
            return cls.token(g["token_pos"])
        if g["pos"]:
            return cls.pos_embed(g["pos_pos"])
        if g["bias"] is not None:
            return cls.bias(g["bias"], g["bias_layer"])
        return cls._parse_layer(g)

    @classmethod
    def _parse_layer(cls, g: dict[str, Any]) -> Node:
        """A node of one layer (``L3.``...) from the pattern's groups."""
        layer = g["layer"]
        if g["head"] is not None:
            if g["q"]:
                return cls.query(layer, g["head"])
            return cls.head_node(layer, g["head"], g["head_pos"], g["source"])
        if g["expert"] is not None:
            return cls.expert_node(layer, g["expert"])
        if g["shared"]:
            return cls.shared_expert(layer)
        if g["group"] is not None:
            return (cls.key if g["kv"] == "k" else cls.value)(layer, g["group"])
        if g["feature"] is not None:
            return cls.feature_node(layer, g["feature_pos"], g["feature"])
        if g["error_pos"] is not None:
            return cls.error(layer, g["error_pos"])
        if g["skip_pos"] is not None:
            return cls.skip(layer, g["skip_pos"])
        if g["b_O"]:
            return cls.attn_bias(layer)
        if g["b_dec"]:
            return cls.decoder_bias(layer)
        return cls.mlp(layer, g["mlp_pos"])
