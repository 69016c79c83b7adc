"""Interventions on transcoder features: set or scale features at positions and see what follows.

*Constrained* (``constrained=True``): attention patterns, norm divisors and every transcoder output are held at
their values on the unedited prompt (:mod:`~interp.circuits.features.held`), and each edited feature adds its
change of activation times its decoder rows to the outputs it writes (the skip connection follows its input).
What moves is then only the direct, linear effect the attribution graph describes: a target's pre-activation
changes by ``sum_s (delta_s / a_s) A[t, s]``.

*Free* (``constrained=False``): the model runs forward again with the transcoders spliced in (the error term
kept, so an unedited run is the model's own) and the edited features clamped where they are computed: downstream
attention, norms, MLPs and features all respond. :func:`generate_with_features` does the same while
generating, the clamps applying at every step (a clamp without a position also at generated positions, one
with ``generated=True`` at generated positions only); with ``hold_attention=True`` the attention patterns of
the prompt's positions are held at their values on the unedited prompt (circuit-tracer's ``freeze_attention``:
an edit then reaches the prompt's later positions only through the MLPs and norms), while each generated
position attends freely.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp.circuits.features.held import Held
from interp.circuits.features.inputs import check_fit, prompt_ids
from interp.dictionary import SparseDictionary, written_layers
from interp.sae.splice import spliced
from interp.sae.transcoder import Transcoder


@dataclass(frozen=True)
class FeatureEdit:
    """Set feature ``feature`` of ``layer`` to ``value``, or multiply it by ``scale``, at ``position``
    (``None``: every position, generated ones included), or with ``generated=True`` at every generated
    position and at no position of the prompt (in :func:`generate_with_features`)."""

    layer: int
    feature: int
    position: int | None = None
    value: float | None = None
    scale: float | None = None
    generated: bool = False

    def __post_init__(self) -> None:
        if (self.value is None) == (self.scale is None):
            raise ValueError(f"a FeatureEdit sets a value or a scale, exactly one; got {self}")
        if self.generated and self.position is not None:
            raise ValueError(
                f"a FeatureEdit at the generated positions has no position of its own; got {self}"
            )

    def applied(self, acts: torch.Tensor) -> torch.Tensor:
        """The edited activations ``[..., pos]`` of this feature, from the current ones."""
        return torch.full_like(acts, float(self.value)) if self.value is not None else acts * self.scale


@dataclass(frozen=True)
class Intervened:
    """What an intervened run gives.

    Attributes:
        logits: ``[pos, d_vocab]``.
        pre_activations: layer -> ``[pos, d_transcoder]`` every feature's pre-activation at its input hook.
        unembed_in: ``[pos, d_model]`` the unembedding's input (de-meaned logits are linear in it).
    """

    logits: torch.Tensor
    pre_activations: dict[int, torch.Tensor]
    unembed_in: torch.Tensor


def intervene(
    model: Any,
    transcoders: Transcoder,
    prompt: str | torch.Tensor | Sequence[int],
    edits: Sequence[FeatureEdit],
    *,
    constrained: bool = False,
) -> Intervened:
    """Run ``prompt`` with ``edits`` applied, constrained or free (see the module docstring)."""
    check_fit(model, transcoders)
    edits = _checked(edits, transcoders)
    if any(e.generated for e in edits):
        raise ValueError(
            "an edit at the generated positions acts while generating: use generate_with_features"
        )
    tokens = prompt_ids(model, prompt)
    with torch.no_grad():
        return (
            _constrained(model, transcoders, tokens, edits)
            if constrained
            else _free(model, transcoders, tokens, edits)
        )


def generate_with_features(
    model: Any,
    transcoders: Transcoder,
    prompt: str | torch.Tensor | Sequence[int],
    edits: Sequence[FeatureEdit],
    max_new_tokens: int,
    *,
    hold_attention: bool = False,
    **kwargs: Any,
) -> Any:
    """``model.generate`` on the replacement model with ``edits`` clamped at every step; keyword arguments go
    to :func:`interp.generate` (the whole sequence is rerun each step, so positions are absolute). With
    ``hold_attention``, the prompt's attention patterns are held at their unedited values (see the module
    docstring; one prompt only)."""
    check_fit(model, transcoders)
    edits = _checked(edits, transcoders)
    hooks = _clamps(transcoders, edits)
    if hold_attention:
        hooks += _held_prompt_attention(model, prompt, kwargs.get("prepend_bos"))
    with spliced(model, transcoders, use_error_term=True):
        return model.generate(prompt, max_new_tokens, fwd_hooks=hooks, use_kv_cache=False, **kwargs)


def _held_prompt_attention(model: Any, prompt: Any, prepend_bos: bool | None) -> list[tuple[str, Any]]:
    """Hooks holding every layer's attention pattern at the prompt's query positions at its value on the
    unedited prompt (the rows of generated positions are left to attend freely)."""
    from interp.generation.prompts import make_prompt

    ids = make_prompt(model, prompt, attention_mask=None, prepend_bos=prepend_bos).ids
    if ids.shape[0] != 1:
        raise ValueError(f"hold_attention holds one prompt's patterns; got a batch of {ids.shape[0]}")
    names = [n for n in model.hook_names() if n.endswith("attn.hook_pattern")]
    with torch.no_grad():
        _, clean = model.run_with_cache(ids, names_filter=names)

    def hold(pattern: torch.Tensor, hook: Any) -> torch.Tensor:  # [batch, head, query, key]
        held = clean[hook.name]  # [1, head, p, p]
        p = held.shape[-1]
        pattern = pattern.clone()
        pattern[:, :, :p, :p] = held.to(pattern.dtype)
        pattern[:, :, :p, p:] = 0.0  # causal: a prompt position never sees a generated one
        return pattern

    return [(name, hold) for name in names]


def _checked(edits: Sequence[FeatureEdit], transcoders: SparseDictionary) -> list[FeatureEdit]:
    edits = [edits] if isinstance(edits, FeatureEdit) else list(edits)
    for e in edits:
        if not isinstance(e, FeatureEdit):
            raise TypeError(f"edits are FeatureEdit values, got {type(e).__name__} {e!r}")
        if e.layer not in transcoders.layers:
            raise ValueError(
                f"{e} edits layer {e.layer}; the transcoders have layers {list(transcoders.layers)}"
            )
        if not 0 <= e.feature < transcoders.n_features(e.layer):
            raise ValueError(
                f"{e} edits feature {e.feature}; layer {e.layer} has {transcoders.n_features(e.layer)} features"
            )
    return edits


def _clamps(transcoders: SparseDictionary, edits: list[FeatureEdit]) -> list[tuple[str, Any]]:
    by_layer: dict[int, list[FeatureEdit]] = {}
    for e in edits:
        by_layer.setdefault(e.layer, []).append(e)

    def clamp_for(layer_edits: list[FeatureEdit]):
        def clamp(acts: torch.Tensor, hook: Any) -> torch.Tensor:  # [batch, pos, d_transcoder]
            acts = acts.clone()
            for e in layer_edits:
                if e.generated:
                    state = getattr(hook, "generation", None)
                    if state is not None:  # [batch, pos]: the generated positions of this pass
                        column = acts[:, :, e.feature]
                        acts[:, :, e.feature] = torch.where(state.generated, e.applied(column), column)
                    continue
                where = slice(None) if e.position is None else e.position
                if e.position is not None and e.position >= acts.shape[1]:
                    continue
                acts[:, where, e.feature] = e.applied(acts[:, where, e.feature])
            return acts

        return clamp

    return [
        (f"{transcoders.output_hook(layer)}.hook_sae_acts_post", clamp_for(es))
        for layer, es in by_layer.items()
    ]


def _free(model: Any, transcoders: Transcoder, tokens: torch.Tensor, edits: list[FeatureEdit]) -> Intervened:
    seen: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, hook: Any) -> None:
        seen[hook.name] = x[0]

    ins = [transcoders.input_hook(layer) for layer in transcoders.layers]
    with spliced(model, transcoders, use_error_term=True):
        logits = model.run_with_hooks(
            tokens[None],
            fwd_hooks=[*_clamps(transcoders, edits), *((n, keep) for n in [*ins, "unembed.hook_in"])],
        )
    return _result(transcoders, logits[0], seen)


def _constrained(
    model: Any, transcoders: SparseDictionary, tokens: torch.Tensor, edits: list[FeatureEdit]
) -> Intervened:
    held = Held.run(model, transcoders, tokens)
    writes = _decoder_changes(transcoders, held.clean, edits, len(tokens))
    seen: dict[str, torch.Tensor] = {}

    def add(x: torch.Tensor, hook: Any) -> torch.Tensor:
        return x + writes[held.outputs[hook.name]].to(x.device, x.dtype)

    def keep(x: torch.Tensor, hook: Any) -> None:
        seen[hook.name] = x[0]

    extra = [(n, add) for n in held.outputs] + [(n, keep) for n in [*held.inputs, "unembed.hook_in"]]
    logits = model.run_with_hooks(tokens[None], fwd_hooks=[*held.hooks(transcoders), *extra])
    return _result(transcoders, logits[0], seen)


def _decoder_changes(
    tc: SparseDictionary, clean: Any, edits: list[FeatureEdit], n_pos: int
) -> dict[int, torch.Tensor]:
    """Out layer -> ``[pos, d_model]``: the edited features' change of activation times their decoder rows."""
    writes = {out: torch.zeros(n_pos, tc.d_out) for out in written_layers(tc)}
    for e in edits:
        acts = tc.encode(clean[tc.input_hook(e.layer)][0], e.layer)[1][:, e.feature].float()  # [pos]
        where = torch.arange(n_pos) if e.position is None else torch.tensor([e.position])
        delta = e.applied(acts[where]) - acts[where]  # [n]
        rows = tc.decoder(e.layer, torch.tensor([e.feature]))[0].float()  # [n_out, d_model]
        for j, out in enumerate(tc.output_layers(e.layer)):
            writes[out] = writes[out].to(rows.device)
            writes[out][where] += delta[:, None] * rows[j]
    return writes


def _result(tc: SparseDictionary, logits: torch.Tensor, seen: dict[str, torch.Tensor]) -> Intervened:
    pre = {layer: tc.encode(seen[tc.input_hook(layer)], layer)[0].float() for layer in tc.layers}
    return Intervened(logits=logits.float(), pre_activations=pre, unembed_in=seen["unembed.hook_in"].float())
