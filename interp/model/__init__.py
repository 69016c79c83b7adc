"""The instrumented transformer, one component per file.

Glossary (used everywhere in interp; checkpoint-specific names appear only in ``interp.load``):

=============  ===============================================================
``batch``      sequences in a forward pass
``pos``        token positions; ``query`` and ``key`` when both sides of attention are meant
``d_model``    width of the residual stream
``n_heads``    query heads per layer (``h``)
``n_kv_heads`` key/value heads per layer (``g``); fewer than ``n_heads`` under grouped-query attention
``d_head``     width of one head
``d_mlp``      hidden width of the MLP
``d_vocab``    vocabulary size
``n_layers``   blocks
``n_ctx``      longest sequence the model accepts
=============  ===============================================================

Activations are ``[batch, pos, d_model]`` in the stream, ``[batch, pos, head, d_head]`` per head and
``[batch, head, query, key]`` for scores and patterns. Weights multiply on the right (``x @ W``); their names
and shapes are listed in ``docs/PARAMS.md``.
"""

from interp.model.transformer import HookedTransformer

__all__ = ["HookedTransformer"]
