"""The TransformerLens hook names in published transcoder configs, mapped to interp's hook points per family.

circuit-tracer's configs name a transcoder's input and output hooks the TransformerLens way and map each, per
architecture, to a tensor of the Hugging Face model. The same names map to interp's hooks as follows (every
family's variation read from its config fields, never from its name):

=====================  ============================================  =============================================
config name            what circuit-tracer reads                      interp
=====================  ============================================  =============================================
``hook_resid_mid``     the stream entering the MLP's norm              ``hook_resid_mid``
``ln2.hook_normalized`` the pre-MLP norm's output before its gain       ``ln2.hook_normalized``
                       (Gemma 2/3: inside ``pre_feedforward_layernorm``)
``mlp.hook_in``        the pre-MLP norm's output after its gain         ``ln2.hook_normalized``, with ``ln2``'s gain
                       (Llama, Qwen3, Gemma 3)                          (and bias) folded into the encoder and skip
``hook_mlp_out``       the MLP's write to the stream (Gemma: after      ``hook_mlp_out``
                       ``post_feedforward_layernorm``)
``mlp.hook_out``       the MLP module's output                          ``hook_mlp_out`` where no norm follows the MLP;
                                                                        refused where one does (Gemma)
=====================  ============================================  =============================================

interp has no hook on a norm's output after its gain, but the gain is a fixed per-feature scale, so an
encoder reading ``g * x + b`` equals one reading ``x`` with ``W_enc * g`` and ``b_enc + W_enc @ b``; the skip
term likewise (its constant goes into ``b_dec``). Post-norm and parallel blocks have no MLP input of their own
in these terms, and are refused with the reason.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from interp.sae.transcoder.base import Transcoder

INPUT_NAMES = ("hook_resid_mid", "ln2.hook_normalized", "mlp.hook_in")
OUTPUT_NAMES = ("hook_mlp_out", "mlp.hook_out")
UNMAPPED = ("mlp.hook_in", "mlp.hook_out")
"""Config names that have no interp hook of the same name: they need the model to be mapped."""

_TO_CONFIG = {"hook_resid_mid": "hook_resid_mid", "ln2.hook_normalized": "ln2.hook_normalized"}


def check_names(input_hook: str, output_hook: str, source: str) -> None:
    """Raise one line when a config names hooks no transcoder format uses."""
    if input_hook not in INPUT_NAMES:
        raise ValueError(f"{source}: feature_input_hook={input_hook!r}; expected one of {list(INPUT_NAMES)}")
    if output_hook not in OUTPUT_NAMES:
        raise ValueError(
            f"{source}: feature_output_hook={output_hook!r}; expected one of {list(OUTPUT_NAMES)}"
        )


def sites(input_hook: str, output_hook: str, cfg: Any | None) -> tuple[str, str, bool]:
    """``(input_site, output_site, fold_gain)`` for the config names on a model of config ``cfg``.

    Without ``cfg`` the names interp shares are mapped and the others kept as they are (splicing then asks for
    the model). Raises ValueError naming the convention a family cannot express.
    """
    check_names(input_hook, output_hook, "the transcoder config")
    if cfg is None:
        return input_hook, "hook_mlp_out" if output_hook == "hook_mlp_out" else output_hook, False
    placement, parallel = cfg.norm_placement, cfg.parallel_attn_mlp
    if placement in ("post", "output") or parallel:
        kind = "parallel attention and MLP" if parallel else f"norm_placement={placement!r}"
        raise ValueError(
            f"transcoders read the MLP's input ({input_hook!r}); a model with {kind} has no stream entering an "
            "MLP norm of its own, so this convention cannot be expressed"
        )
    if output_hook == "mlp.hook_out" and placement == "sandwich":
        raise ValueError(
            "feature_output_hook='mlp.hook_out' is the MLP's output before the post-MLP norm (ln2_post), which "
            "interp has no hook for; Gemma transcoders write 'hook_mlp_out', the stream write after that norm"
        )
    if input_hook == "mlp.hook_in":
        return "ln2.hook_normalized", "hook_mlp_out", True
    return input_hook, "hook_mlp_out", False


def config_names(tc: Transcoder) -> tuple[str, str]:
    """The TransformerLens names to write for ``tc``'s hooks (``ln2.hook_normalized`` once a gain is folded)."""
    names = []
    for site in (tc.input_site, tc.output_site):
        if site in UNMAPPED or site == "hook_mlp_out":
            names.append(site)
        elif site in _TO_CONFIG:
            names.append(_TO_CONFIG[site])
        else:
            raise ValueError(
                f"the transcoder reads or writes {site!r}, which circuit-tracer's configs cannot name; they name "
                f"{list(INPUT_NAMES)} and {list(OUTPUT_NAMES)}"
            )
    return names[0], names[1]


def bind(tc: Transcoder, model: Any) -> Transcoder:
    """``tc`` with its config hook names mapped onto ``model``'s hooks (a copy when a gain is folded).

    Args:
        tc: a transcoder whose sites may still be config names (``mlp.hook_in``, ``mlp.hook_out``).
        model: the :class:`~interp.HookedTransformer` it will be spliced into.
    """
    names = tc.metadata.get("config_hooks", (tc.input_site, tc.output_site))
    input_site, output_site, fold = sites(names[0], names[1], model.cfg)
    if tc.input_site == input_site and tc.output_site == output_site and not fold:
        return tc
    if tc.input_site not in UNMAPPED and fold:
        raise ValueError(f"the transcoder already reads {tc.input_site!r}; its gain was folded once")
    out = copy.deepcopy(tc)
    out.input_site, out.output_site = input_site, output_site
    if fold:
        _fold_gain(out, model)
    return out


@torch.no_grad()
def _fold_gain(tc: Transcoder, model: Any) -> None:
    """Make ``tc`` read ``ln2.hook_normalized`` instead of ``ln2``'s output ``g * x + b`` (in place)."""
    for row, layer in enumerate(tc.layers):  # a CLT's rows are its layers 0..n-1
        norm = model.blocks[layer].ln2
        g = norm.gain.to(tc.W_enc.device, tc.W_enc.dtype)  # [d_model]
        b = None if norm.b is None else norm.b.to(tc.W_enc.device, tc.W_enc.dtype)
        if b is not None:
            tc.b_enc[row] += tc.W_enc[row] @ b
        tc.W_enc[row] *= g
        if tc.has_skip:
            if b is not None:
                tc.b_dec[row] += tc.W_skip[row] @ b
            tc.W_skip[row] *= g
    tc.metadata["folded_gain"] = "ln2"
