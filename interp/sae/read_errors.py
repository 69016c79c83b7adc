"""A dictionary's files that cannot be decoded are named in the error, as ``interp.load`` names a checkpoint.

The decoders underneath (``json``, ``safetensors``, ``numpy``'s ``.npz`` reader) raise errors that say what
went wrong at which byte but not in which file; :func:`damaged_files_named` turns each into one
:class:`~interp.sae.formats.build.SAEFormatError` that names the file or folder being read.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from safetensors import SafetensorError

from interp.sae.formats.build import SAEFormatError

_DECODER_ERRORS = (json.JSONDecodeError, UnicodeDecodeError, SafetensorError, zipfile.BadZipFile, EOFError)


@contextmanager
def damaged_files_named(path: Path) -> Iterator[None]:
    """Re-raise a decoder's error inside the block as an :class:`SAEFormatError` that names ``path``.

    Raises:
        SAEFormatError: A file under ``path`` is cut short or not of the format it claims to be.
    """
    try:
        yield
    except _DECODER_ERRORS as err:
        doc = getattr(err, "doc", None)  # a JSONDecodeError knows the text, not the file
        what = "a JSON file in it is not valid JSON" if doc is not None else "a file in it cannot be decoded"
        raise SAEFormatError(
            f"{path}: {what} ({type(err).__name__}: {err}); the files may be cut short by an interrupted "
            "download or save: write or fetch them again"
        ) from None
