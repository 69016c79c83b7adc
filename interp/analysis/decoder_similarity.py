"""The features whose decoder rows point most nearly the same way as a given direction.

Two features whose decoders write nearly the same direction move the model alike; a steering vector's nearest
features say which learned directions it resembles. The row compared is what one unit of a feature writes into
its own layer's output hook (a cross-layer transcoder's first output), so every feature of a layer is compared
in the same space.
"""

from __future__ import annotations

import torch

from interp.dictionary import SparseDictionary


def decoder_similarity(
    dictionary: SparseDictionary, layer: int, direction: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` features of ``layer`` whose decoder rows have the highest cosine similarity with ``direction``.

    Args:
        dictionary: any :class:`~interp.dictionary.SparseDictionary`.
        direction: ``[d_out]``, in the space of the layer's output hook (a feature's own decoder row, or a
            vector read at that hook).
        k: how many; at most the layer's features.

    Returns:
        ``(similarities, features)``, both ``[k]``, most similar first (float32 and long, on the CPU); a
        decoder row of zero norm has similarity 0, one holding NaN ``-inf``.
    """
    n = dictionary.n_features(layer)
    if not 1 <= k <= n:
        raise ValueError(f"k={k}; give 1 to {n}, the features of layer {layer}")
    if direction.shape != (dictionary.d_out,):
        raise ValueError(
            f"the direction has shape {list(direction.shape)}; layer {layer} writes vectors of width "
            f"{dictionary.d_out}"
        )
    with torch.no_grad():
        rows = dictionary.decoder(layer)[:, 0].float()  # [n, d_out]: the write into the layer's own output
        query = direction.to(rows.device, torch.float32)
        norms = rows.norm(dim=-1) * query.norm()  # [n]
        cosine = torch.where(norms == 0, torch.zeros_like(norms), rows @ query / norms)
        cosine = torch.nan_to_num(cosine, nan=float("-inf"))  # a row holding NaN ranks last
        values, features = cosine.topk(k)
    return values.cpu(), features.cpu()
