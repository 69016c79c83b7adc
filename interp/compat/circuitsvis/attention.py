"""``circuitsvis.attention``: ``attention_heads`` and ``attention_pattern`` from :mod:`interp.report.patterns`."""

from interp.report.patterns import attention_heads, attention_pattern

__all__ = ["attention_heads", "attention_pattern"]
