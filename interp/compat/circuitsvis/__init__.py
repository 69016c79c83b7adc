"""circuitsvis's attention functions on interp's offline pictures: ``import interp.compat.circuitsvis as cv``,
then ``cv.attention.attention_heads(tokens=..., attention=...)`` (see :mod:`interp.report.patterns`)."""

from interp.compat.circuitsvis import attention

__all__ = ["attention"]
