"""Runs llama.cpp's ``convert_hf_to_gguf.py`` over several model folders in one process.

Usage: ``python llama_cpp_driver.py CONVERTER_DIR FOLDER OUT.gguf [FOLDER OUT.gguf ...]``, with ``PYTHONPATH``
set to ``CONVERTER_DIR/gguf-py``. Each pair is converted by the converter's own ``main()`` with
``--outtype f32``, exactly as ``python convert_hf_to_gguf.py FOLDER --outfile OUT.gguf --outtype f32`` would.

One thing is put back: the converter reads a model's config through ``transformers.AutoConfig``, and
``transformers`` 5 rewrites some keys on the way (GPT-NeoX's ``rotary_pct`` becomes ``rope_parameters``), which
this converter release still reads by their old names. The keys of ``config.json`` that ``AutoConfig`` dropped
are restored from the file; nothing the converter computes is changed.
"""

import json
import sys
from pathlib import Path

root = Path(sys.argv[1])
sys.path.insert(0, str(root))

import convert_hf_to_gguf  # noqa: E402
from conversion import ModelBase  # noqa: E402

_load_hparams = ModelBase.load_hparams


def _with_config_json(dir_model, is_mistral_format):
    hparams = _load_hparams(dir_model, is_mistral_format)
    on_disk = json.loads((Path(dir_model) / "config.json").read_text(encoding="utf-8"))
    return {**on_disk, **hparams}


ModelBase.load_hparams = staticmethod(_with_config_json)

pairs = sys.argv[2:]
for folder, out in zip(pairs[::2], pairs[1::2], strict=True):
    sys.argv = ["convert_hf_to_gguf.py", folder, "--outfile", out, "--outtype", "f32"]
    convert_hf_to_gguf.main()
