"""``load_checkpoint``: a packaged name, a model folder or a GGUF file -> (config, state dict, tokenizer).

This is the whole output of the loader layer: a :class:`TransformerConfig`, a state dict in the parameter
names of docs/PARAMS.md (checked against them), and a :class:`~interp.tokens.Tokenizer`. It knows nothing of
hooks.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from interp.config import TransformerConfig
from interp.load import cache
from interp.load.errors import CheckpointError
from interp.load.families import family_for, gguf_family_for
from interp.load.folder import read_folder
from interp.load.gguf_file import GGUFFile
from interp.load.gguf_tokenizer import gguf_tokenizer
from interp.load.hf_tokenizer import folder_tokenizer
from interp.load.packaged import PACKAGED_MODELS, packaged_path
from interp.load.shapes import check_state_dict
from interp.tokens import Tokenizer

Checkpoint = tuple[TransformerConfig, dict[str, torch.Tensor], Tokenizer]


def load_checkpoint(
    name_or_path: str | os.PathLike, *, use_cache: bool = True, dtype: torch.dtype | None = torch.float32
) -> Checkpoint:
    """Read a checkpoint into ``(config, state_dict, tokenizer)``.

    Args:
        name_or_path: a packaged model name (``"smollm2-135m"``, ``"minilm-l6"``), a Hugging Face model folder
            (``config.json``, ``*.safetensors``, ``tokenizer.json``) or a ``.gguf`` file.
        use_cache: for GGUF files, reuse (and fill) the cache of dequantized weights (see
            :mod:`interp.load.cache`).
        dtype: the dtype of the floating tensors returned, each converted once; ``None`` keeps each in the
            dtype its checkpoint stores (a GGUF file's are dequantized to float32, MXFP4 to bfloat16, which holds
            its values exactly), for a caller that converts them itself, one at a time, as
            :func:`interp.load.load` does.

    Returns:
        The config, the state dict in our parameter names, and the tokenizer (its ``n_ctx`` set).

    Raises:
        FileNotFoundError: no such model, file, or package (with the command that installs it).
        CheckpointError: a file that is corrupt, truncated, unsupported, or contradicts its config.
    """
    path = _resolve(name_or_path)
    if path.is_dir():
        checkpoint = _from_folder(path)
    else:
        with path.open("rb") as f:
            is_gguf = f.read(4) == b"GGUF"
        if not (is_gguf or path.suffix == ".gguf"):
            raise _not_a_checkpoint(path)
        checkpoint = _from_gguf(path, use_cache)
    if dtype is not None:
        cfg, state, tokenizer = checkpoint
        for name in list(state):
            if state[name].is_floating_point():
                state[name] = state[name].to(dtype)
    if isinstance(name_or_path, str) and name_or_path in PACKAGED_MODELS:
        cfg, state, tokenizer = checkpoint  # reports name a packaged model as the user did
        checkpoint = (cfg.replace(name=name_or_path), state, tokenizer)
    return checkpoint


def _not_a_checkpoint(path: Path) -> CheckpointError:
    return CheckpointError(
        f"{path} is neither a model folder nor a GGUF file; for safetensors weights, pass the folder that "
        "holds them with config.json and tokenizer.json"
    )


def _resolve(name_or_path: str | os.PathLike) -> Path:
    if isinstance(name_or_path, str) and name_or_path in PACKAGED_MODELS:
        return packaged_path(name_or_path)
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path
    if isinstance(name_or_path, str) and os.sep not in name_or_path and not path.suffix:
        raise FileNotFoundError(
            f"{name_or_path!r} is neither a packaged model ({sorted(PACKAGED_MODELS)}) nor an existing file "
            "or folder; models are never downloaded, so pass a local path"
        )
    raise FileNotFoundError(
        f"no model file or folder at {path}; pass a packaged name ({', '.join(sorted(PACKAGED_MODELS))}), "
        "a Hugging Face folder (config.json, *.safetensors, tokenizer.json) or a .gguf file"
    )


def _from_folder(folder: Path) -> Checkpoint:
    hf, tensors = read_folder(folder)
    family = family_for(hf.model_type, hf.source)
    cfg, state = family.read(hf, tensors)
    check_state_dict(state, cfg, str(folder))
    tokenizer = folder_tokenizer(folder, hf, n_ctx=cfg.n_ctx)
    _check_vocab(tokenizer, cfg, str(folder))
    return cfg, state, tokenizer


def _from_gguf(path: Path, use_cache: bool) -> Checkpoint:
    if not use_cache:
        return _convert_gguf(path)
    cfg, state, tokenizer = cache.converted(cache.file_sha256(path), lambda: _convert_gguf(path))
    tokenizer.name = str(path)
    return cfg, state, tokenizer


def _convert_gguf(path: Path) -> Checkpoint:
    file = GGUFFile(path)
    hf, tensors = gguf_family_for(file.architecture, str(path)).from_gguf(file)
    family = family_for(hf.model_type, hf.source)  # a llama file with experts is a Mixtral
    cfg, state = family.read(hf, tensors)
    check_state_dict(state, cfg, str(path))
    tokenizer = gguf_tokenizer(file, n_ctx=cfg.n_ctx)
    _check_vocab(tokenizer, cfg, str(path))
    return cfg, state, tokenizer


def _check_vocab(tokenizer: Tokenizer, cfg: TransformerConfig, source: str) -> None:
    if tokenizer.vocab_size > cfg.d_vocab:
        raise CheckpointError(
            f"{source}: the tokenizer has {tokenizer.vocab_size} tokens but the model embeds only "
            f"d_vocab={cfg.d_vocab}; the tokenizer does not belong to these weights"
        )
