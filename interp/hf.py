"""``from_hf``: a loaded ``transformers`` model as a :class:`~interp.HookedTransformer` with the same weights.

There is one converter per checkpoint family, in :mod:`interp.load` (the table in
:mod:`interp.load.families`); a loaded model is just another source for it. Its ``config.to_dict()`` is the
``config.json`` it would save and its ``state_dict()`` holds the tensors it would save (plus tied copies and
buffers, which the converters already accept), so ``from_hf`` is the folder loader without the folder: the
same config mapping, the same tensor checks, the same state-dict contract. ``transformers`` is never imported
here; the model is read through ``config`` and ``state_dict()`` only.
"""

from __future__ import annotations

from typing import Any

import torch

from interp.config import TransformerConfig
from interp.model import HookedTransformer


def from_hf(
    hf_model: Any,
    *,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
) -> HookedTransformer:
    """Convert a loaded Hugging Face model of a supported family (``interp models`` lists them) into a
    HookedTransformer.

    Args:
        hf_model: a ``transformers`` ``PreTrainedModel`` of a supported family, with or without its head
            (``GPT2LMHeadModel`` or ``GPT2Model``, ``BertForMaskedLM`` or ``BertModel``...).
        device: where to put the result; default: the device of ``hf_model``'s parameters.
        dtype: its floating dtype; default: the dtype of ``hf_model``'s parameters.

    Returns:
        The model in eval mode; its logits equal ``hf_model``'s to float tolerance. It has no tokenizer
        (``interp.load`` on the model's folder gives one).

    Raises:
        TypeError: ``hf_model`` has no ``config.to_dict()``.
        CheckpointError: an unsupported family, or a config feature the converter does not implement.

    Example:
        >>> hf_model = transformers.GPT2LMHeadModel.from_pretrained(folder)  # doctest: +SKIP
        >>> model = from_hf(hf_model)  # doctest: +SKIP
    """
    # The loader layer is imported on use, so that ``import interp`` stays light.
    from interp.load.families import family_for
    from interp.load.hf_config import HFConfig
    from interp.load.instantiate import parse_device, parse_dtype
    from interp.load.shapes import check_state_dict
    from interp.load.tensors import TensorSource

    config = getattr(hf_model, "config", None)
    if not callable(getattr(config, "to_dict", None)) or not callable(getattr(hf_model, "state_dict", None)):
        raise TypeError(
            f"from_hf needs a transformers model (with .config.to_dict() and .state_dict()), "
            f"got {type(hf_model).__name__}"
        )
    source = f"{type(hf_model).__name__} ({config.to_dict().get('_name_or_path') or 'in memory'})"
    hf = HFConfig(config.to_dict(), source)
    first = next(hf_model.parameters(), None)
    state = {name: t.detach() for name, t in hf_model.state_dict().items()}
    tensors = TensorSource(state, source)
    family = family_for(hf.model_type, source)
    cfg: TransformerConfig
    cfg, ours = family.read(hf, tensors)
    check_state_dict(ours, cfg, source)
    model = HookedTransformer(cfg, init_weights=False)
    model.load_state_dict(ours, strict=True)
    torch_device = parse_device(device) or (first.device if first is not None else None)
    torch_dtype = parse_dtype(dtype) or (first.dtype if first is not None else None)
    return model.to(device=torch_device, dtype=torch_dtype).eval()
