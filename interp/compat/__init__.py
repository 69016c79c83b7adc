"""Faces of other libraries' APIs over interp's model and cache (``interp.compat.transformer_lens``)."""
