"""Generation with hooks in place: :func:`generate`, and the parts of its loop.

``generate.py`` holds the entry point (checks, then the loop); ``loop.py`` the forward passes and the token
buffer; ``prompts.py`` prompts and padding; ``sampling.py`` how the next token is chosen; ``stopping.py`` stop
strings and streaming; ``state.py`` what hooks see of the step they run in; ``result.py`` what comes back.
Users call it as ``interp.generate(model, ...)`` or ``model.generate(...)``.
"""

from interp.generation.generate import generate
from interp.generation.result import Generation
from interp.generation.state import GenerationStep

__all__ = ["Generation", "GenerationStep", "generate"]
