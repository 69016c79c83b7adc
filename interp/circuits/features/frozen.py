"""The local replacement model as one forward pass with the model's own hooks.

Every attention pattern and every norm's divisor (``hook_pattern``, ``*.hook_scale``: the norms before and after
sublayers, the final norm, q/k norms) is detached, and so is every transcoder output hook (the MLP's write),
which is swapped for a leaf tensor of the same value. What is left differentiable is linear in those leaves and
in the token embeddings (also a leaf): the stream, attention's OV path and, for transcoders with one, the skip
connection, which is added back live (``leaf + skip(x) - skip(x).detach()`` keeps the value). The gradient of
any linear read of the pass (a feature's pre-activation at its input hook, a logit direction at
``unembed.hook_in``) with respect to a leaf is then that read's direct effect per unit written at the leaf.

The pass runs the prompt once; each backward pass injects a batch of reads at once, one per row of a batched
gradient (``torch.autograd.grad(..., is_grads_batched=True)``, which vectorises the backward over the rows),
and the autograd graph is kept and reused across backward passes. The heads' mix of values (``hook_z``) is
recomputed from the frozen pattern as one 2-D product per key/value head: vectorised over the rows, the
backward of a 2-D product reads the pattern in place, where that of the model's own batched product copies it
once per row (``[rows, head, query, key]``: most of a long prompt's backward time, and its memory). No
per-architecture mapping is involved: the hooks exist on every family interp loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from interp.dictionary import SparseDictionary, written_layers

FROZEN_SUFFIXES = ("hook_pattern", "hook_scale")


@dataclass
class FrozenRun:
    """What the frozen forward pass of a prompt leaves behind.

    Attributes:
        logits: ``[d_vocab]`` at the last position, detached.
        inputs: layer -> the live transcoder input ``[1, pos, d_model]`` (differentiable).
        outputs: layer -> the leaf at the transcoder output hook ``[1, pos, d_model]``.
        skips: layer -> the skip connection's write (detached), where the transcoder has one.
        embed: the leaf at ``hook_embed`` ``[1, pos, d_model]``.
        unembed_in: the live input of the unembedding (what ``unembed.hook_in`` holds) ``[1, pos, d_model]``.
    """

    logits: torch.Tensor | None = None
    inputs: dict[int, torch.Tensor] = field(default_factory=dict)
    outputs: dict[int, torch.Tensor] = field(default_factory=dict)
    skips: dict[int, torch.Tensor] = field(default_factory=dict)
    embed: torch.Tensor | None = None
    unembed_in: torch.Tensor | None = None

    @property
    def leaves(self) -> list[torch.Tensor]:
        """``[embed, output of layer 0, 1, ...]``: where sources write, in the order gradients are returned."""
        return [self.embed, *(self.outputs[layer] for layer in sorted(self.outputs))]


def frozen_run(model: Any, tokens: torch.Tensor, transcoders: SparseDictionary) -> FrozenRun:
    """Run ``tokens [pos]`` through the frozen model (see the module docstring)."""
    run = FrozenRun()
    unread = _unread(model, transcoders)
    detach = [n for n in model.hook_names() if n.endswith(FROZEN_SUFFIXES) or n in unread]
    fwd: list[tuple[str, Callable]] = [(name, lambda x, hook: x.detach()) for name in detach]

    def embed(x: torch.Tensor, hook: Any) -> torch.Tensor:
        run.embed = x.detach().requires_grad_(True)
        return run.embed

    fwd.append(("hook_embed", embed))
    fwd += _mix_by_head(model)
    fwd += [(transcoders.input_hook(layer), _record(run.inputs, layer)) for layer in transcoders.layers]
    fwd += [
        (transcoders.output_hook(out), _write_site(run, transcoders, out))
        for out in written_layers(transcoders)
    ]
    # Functions on one point run in the order they were attached, each seeing the last one's output.
    with torch.enable_grad(), model.hooks(fwd):
        stream = model(tokens[None], stop_at_layer=model.cfg.n_layers)  # [1, pos, d_model]
        x = model.ln_final(stream) if model.ln_final is not None else stream
        run.unembed_in = model.head(x) if model.head is not None else x
    with torch.no_grad():  # logits of the last position only
        run.logits = model.unembed(run.unembed_in[:1, -1:].detach())[0, -1]
    return run


def _unread(model: Any, transcoders: SparseDictionary) -> set[str]:
    """Hooks whose gradients nothing reads once patterns and MLP outputs are frozen, detached so that autograd
    keeps none of what follows them: the queries and keys (they only make patterns) and, where the transcoders
    replace the MLPs' outputs, the MLPs' hidden activations."""
    names = set(model.hook_names())
    unread = {n for n in names if n.endswith((".attn.hook_q", ".attn.hook_k"))}
    if all(transcoders.output_hook(layer) == f"blocks.{layer}.hook_mlp_out" for layer in transcoders.layers):
        unread |= {n for n in names if ".mlp.hook_" in n}
    return unread


def _mix_by_head(model: Any) -> list[tuple[str, Callable]]:
    """Hooks that record each layer's values and frozen pattern and replace ``hook_z`` by the same mix, one 2-D
    product per key/value head (see the module docstring); a batch of one prompt."""
    seen: dict[str, torch.Tensor] = {}
    group = model.cfg.group_size

    def keep(key: str) -> Callable:
        def record(x: torch.Tensor, hook: Any) -> None:
            seen[key] = x

        return record

    def mix(z: torch.Tensor, hook: Any) -> torch.Tensor:
        pattern, v = seen.pop("pattern")[0], seen.pop("v")[0]  # [head, query, key], [key, kv_head, d_head]
        n_heads, n_q, n_k = pattern.shape
        # The query heads that share a key/value head are one run of rows: [kv_head, group * query, key].
        grouped = pattern.reshape(-1, group * n_q, n_k)
        mixed = torch.stack([p @ values for p, values in zip(grouped, v.unbind(1), strict=True)])
        return mixed.view(n_heads, n_q, -1).transpose(0, 1)[None].to(z.dtype)  # [1, query, head, d_head]

    hooks = []
    for layer in range(model.cfg.n_layers):
        a = f"blocks.{layer}.attn."
        hooks += [(a + "hook_v", keep("v")), (a + "hook_pattern", keep("pattern")), (a + "hook_z", mix)]
    return hooks


def _record(store: dict[int, torch.Tensor], layer: int) -> Callable:
    def record(x: torch.Tensor, hook: Any) -> None:
        store[layer] = x

    return record


def _write_site(run: FrozenRun, transcoders: SparseDictionary, layer: int) -> Callable:
    def write(x: torch.Tensor, hook: Any) -> torch.Tensor:
        skip = transcoders.skip(run.inputs[layer], layer) if layer in run.inputs else None
        if skip is None:
            run.outputs[layer] = x.detach().requires_grad_(True)
            return run.outputs[layer]
        skip = skip.to(x.dtype)
        run.skips[layer] = skip.detach()
        run.outputs[layer] = (x - skip).detach().requires_grad_(True)
        return run.outputs[layer] + skip

    return write
