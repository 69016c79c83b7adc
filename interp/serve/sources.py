"""The dictionaries a server holds, as Neuronpedia names them: a *source* is one layer of one dictionary,
``LAYER-SETNAME`` (``6-res-interp``), and a *source set* is every layer of the dictionaries given one set name.

Any dictionary interp loads is a source set: an SAE (one layer), several SAEs given the same set name, a
transcoder set or a cross-layer transcoder (every layer). A set's name is the dictionary folder's name unless
``--source-set`` gives one. Features are read through the :class:`~interp.dictionary.SparseDictionary`
interface, so every route treats every kind alike: a source's activations are its features' activations at
the hook it reads, and steering with a feature writes its decoder rows at the hooks it writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.dictionary import SparseDictionary
from interp.serve.errors import RequestError


@dataclass(frozen=True)
class Source:
    """One layer of one dictionary, named ``{layer}-{set_name}``."""

    set_name: str
    layer: int
    dictionary: SparseDictionary

    @property
    def name(self) -> str:
        return f"{self.layer}-{self.set_name}"

    @property
    def n_features(self) -> int:
        return self.dictionary.n_features(self.layer)

    def check_index(self, index: int) -> int:
        """``index`` if it is one of this source's features (400 otherwise)."""
        if not 0 <= index < self.n_features:
            raise RequestError(
                400,
                f"feature {index} is out of range for {self.name}, which has {self.n_features} "
                f"(0 to {self.n_features - 1})",
            )
        return index


class Sources:
    """Every source of the server, by name and by set."""

    def __init__(self, sets: Sequence[tuple[str, SparseDictionary]]) -> None:
        self.by_name: dict[str, Source] = {}
        self.sets: dict[str, list[Source]] = {}
        for set_name, dictionary in sets:
            for layer in dictionary.layers:
                source = Source(set_name, layer, dictionary)
                if source.name in self.by_name:
                    raise ValueError(
                        f"two dictionaries would both be source {source.name!r}; give them different names with "
                        "--source-set (once per --dictionary, in order)"
                    )
                self.by_name[source.name] = source
                self.sets.setdefault(set_name, []).append(source)
        for members in self.sets.values():
            members.sort(key=lambda s: s.layer)

    def get(self, name: str) -> Source:
        """The source named ``name`` (404 naming those there are)."""
        if name not in self.by_name:
            raise RequestError(404, f"no source {name!r} on this server; it has {_listed(self.by_name)}")
        return self.by_name[name]

    def of_set(self, set_name: str) -> list[Source]:
        """The sources of ``set_name``, by layer (404 naming the sets there are)."""
        if set_name not in self.sets:
            raise RequestError(404, f"no source set {set_name!r} on this server; it has {_listed(self.sets)}")
        return self.sets[set_name]


def _listed(names: Any) -> str:
    names = list(names)
    if not names:
        return "none (start it with --dictionary or --transcoders)"
    shown = ", ".join(repr(n) for n in names[:12])
    return shown + (f" and {len(names) - 12} more" if len(names) > 12 else "")


def read_dictionary(path: str | Path, model: Any) -> SparseDictionary:
    """The dictionary at ``path`` (an SAE, a transcoder set or a CLT), on the model's device and dtype and
    checked against it: the one place the server reads dictionaries."""
    from interp.sae.dashboards.loading import load_dictionary

    return load_dictionary(path, model)


def set_names(paths: Sequence[str | Path], given: Sequence[str]) -> list[str]:
    """Each dictionary's set name: ``given`` one per path, one for all, or none (each folder's name)."""
    from interp.sae.dashboards.folder import check_scan, default_scan

    if given and len(given) not in (1, len(paths)):
        raise ValueError(
            f"--source-set is given {len(given)} times for {len(paths)} dictionaries; give it once (one name for "
            "all) or once per dictionary, in the order of --dictionary and then --transcoders"
        )
    names = list(given) * len(paths) if len(given) == 1 else list(given) or [default_scan(p) for p in paths]
    return [check_scan(n, "--source-set") for n in names]
